"""Per-tree computations on user-sized input: linear, and never recursive."""

from __future__ import annotations

import sys

import pytest

from bench.trees import chain_tree, synthetic_tree
from pact_workers.models.names import component_id_problem
from pact_workers.models.tree import DecompositionTree, tree_from_data
from scheduler.wavefront import WorkGraph


def test_a_chain_deeper_than_the_recursion_limit_orders_and_ranks() -> None:
    depth = sys.getrecursionlimit() * 3
    tree = tree_from_data(chain_tree(depth), "<chain>")
    order = tree.topological_order()
    assert order[0] == f"c{depth - 1}" and order[-1] == "c0"
    rank = WorkGraph(tree).rank()
    # The root's contract waits on nothing and leads the longest chain of work.
    assert max(rank, key=rank.__getitem__)[0] in {"c0", f"c{depth - 1}"}


def test_topological_order_puts_children_and_dependencies_first() -> None:
    tree = DecompositionTree.model_validate(synthetic_tree(1_000, 10))
    position = {cid: i for i, cid in enumerate(tree.topological_order())}
    for cid, node in tree.nodes.items():
        for before in [*node.children, *node.dependencies]:
            assert position[before] < position[cid]


@pytest.mark.parametrize(
    ("cid", "reason"),
    [
        ("class", "keyword"),
        ("json", "standard library"),
        ("os", "standard library"),
        ("pytest", "harness"),
        ("conftest", "harness"),
        ("__init__", "dunder"),
        ("x" * 101, "at most 100"),
        ("a-b", "identifier"),
    ],
)
def test_ids_that_cannot_name_a_module_are_refused(cid: str, reason: str) -> None:
    problem = component_id_problem(cid)
    assert problem is not None and reason in problem


@pytest.mark.parametrize(
    "cid", ["lexer", "tokens", "parser", "identity_cli_integration", "x" * 100]
)
def test_ordinary_ids_are_accepted(cid: str) -> None:
    assert component_id_problem(cid) is None
