"""Hierarchy locality (seed 000, 2.4): dependencies should follow the decomposition.

A component may depend, without comment, on a sibling (same parent), on a sibling
of any of its ancestors (an uncle: its parent's sibling, or higher up), on one of its
ancestors or on a component in its own subtree. Any other internal dependency
reaches across the tree and is a *warning*, never an error (it may be intentional):

- a *distant cousin*: the two share a grandparent but not a parent (A, child of B,
  depends on D, child of E, where E is B's sibling);
- a *cross-subtree* dependency: deeper than that; the message says how far each side
  is below their nearest common ancestor.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pact_workers.models.contract import ComponentContract
from pact_workers.models.tree import DecompositionTree
from scheduler.validation.findings import Rule, Severity, ValidationFinding
from scheduler.validation.names import NameIndex


def ancestors(tree: DecompositionTree, component_id: str) -> list[str]:
    """Parent first, up to the root (iterative: trees may be thousands deep)."""
    chain: list[str] = []
    seen = {component_id}
    parent = tree.nodes[component_id].parent_id
    while parent and parent in tree.nodes and parent not in seen:
        chain.append(parent)
        seen.add(parent)
        parent = tree.nodes[parent].parent_id
    return chain


def locality_problem(tree: DecompositionTree, component_id: str, dependency: str) -> str:
    """Why depending on ``dependency`` reaches across the tree, or "" when it is local."""
    if component_id not in tree.nodes or dependency not in tree.nodes:
        return ""
    mine = ancestors(tree, component_id)
    theirs = ancestors(tree, dependency)
    parent = tree.nodes[dependency].parent_id
    if (
        dependency in mine  # an ancestor
        or component_id in theirs  # in my own subtree
        or (parent and parent in mine)  # a sibling, or a sibling of an ancestor
        or (not parent and not tree.nodes[component_id].parent_id)  # two roots
    ):
        return ""
    shared = set(theirs)
    common = next((a for a in mine if a in shared), None)
    up = mine.index(common) + 1 if common else len(mine) + 1
    down = theirs.index(common) + 1 if common else len(theirs) + 1
    where = f"their nearest common ancestor {common!r}" if common else "no common ancestor"
    kind = "a distant cousin" if up == 2 and down == 2 else "a component in another subtree"
    return (
        f"depends on {dependency!r}, {kind}: {component_id!r} is {up} and {dependency!r} "
        f"{down} levels below {where}. A dependency across subtrees couples parts the "
        f"decomposition kept apart; if it is intended, consider making {dependency!r} "
        "(or what it provides) a sibling of a component on this side"
    )


def locality_findings(
    tree: DecompositionTree, component_id: str, dependencies: Sequence[tuple[str, str]]
) -> list[ValidationFinding]:
    """Warnings for the internal ``(field path, component id)`` dependencies that reach
    across the tree."""
    findings = []
    for path, dependency in dependencies:
        problem = locality_problem(tree, component_id, dependency)
        if problem:
            findings.append(
                ValidationFinding(
                    component_id=component_id,
                    severity=Severity.WARNING,
                    rule=Rule.LOCALITY,
                    path=path,
                    message=problem,
                )
            )
    return findings


def validate_hierarchy_locality(
    tree: DecompositionTree, contracts: Mapping[str, ComponentContract]
) -> list[ValidationFinding]:
    """Warnings for every contract dependency that reaches across the tree.

    Dependency names are read as component ids first (see ``names``); names that are
    no component (external modules) have no place in the tree and are not judged.
    """
    index = NameIndex(tree.nodes)
    findings: list[ValidationFinding] = []
    for cid, contract in contracts.items():
        internal = []
        for i, raw in enumerate(contract.dependencies):
            match = index.match(raw)
            if match is not None and match.component_id != cid:
                internal.append((f"dependencies[{i}]", match.component_id))
        findings.extend(locality_findings(tree, cid, internal))
    return findings
