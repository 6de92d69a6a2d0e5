"""Hierarchy locality (seed 000, 2.4): dependencies across the tree warn, never fail."""

from __future__ import annotations

from scheduler.validation import Rule, Severity, validate_hierarchy_locality
from tests.contracts import contract, tree

#          root
#        /      \
#       B        E
#      / \      / \
#     A   C    D   G
#     |        |
#     H        K
LAYOUT = tree(
    {
        "root": None,
        "B": "root",
        "E": "root",
        "A": "B",
        "C": "B",
        "D": "E",
        "G": "E",
        "H": "A",
        "K": "D",
    }
)


def test_sibling_dep_no_warning() -> None:
    assert validate_hierarchy_locality(LAYOUT, {"A": contract("A", dependencies=["C"])}) == []


def test_distant_cousin_warns() -> None:
    """A (child of B) depends on D (child of E, E a sibling of B)."""
    (warning,) = validate_hierarchy_locality(LAYOUT, {"A": contract("A", dependencies=["D"])})
    assert warning.severity is Severity.WARNING and warning.rule is Rule.LOCALITY
    assert warning.path == "dependencies[0]" and "distant cousin" in warning.message


def test_cross_subtree_warns() -> None:
    (warning,) = validate_hierarchy_locality(LAYOUT, {"H": contract("H", dependencies=["K"])})
    assert warning.severity is Severity.WARNING
    assert "another subtree" in warning.message
    # The explanation: how far each side is below their nearest common ancestor.
    assert "'H' is 3 and 'K' 3 levels below their nearest common ancestor 'root'" in (
        warning.message
    )


def test_parents_uncles_ancestors_and_descendants_are_local() -> None:
    contracts = {
        "A": contract("A", dependencies=["B", "E", "H"]),  # parent, uncle, child
        "H": contract("H", dependencies=["C", "root"]),  # uncle, ancestor
        "B": contract("B", dependencies=["H"]),  # grandchild
    }
    assert validate_hierarchy_locality(LAYOUT, contracts) == []


def test_names_are_read_as_ids_and_externals_are_not_judged() -> None:
    contracts = {"A": contract("A", dependencies=["g", "numpy"])}
    (warning,) = validate_hierarchy_locality(LAYOUT, contracts)
    assert "depends on 'G'" in warning.message
