"""The wavefront scheduler's pure core (seed 000, section 4.1)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from pact_workers.errors import CycleError
from pact_workers.models import DecompositionTree, ItemStatus, Phase
from pact_workers.models.tree import load_tree, tree_from_data
from scheduler.wavefront import ComponentState, SchedulingMode, WavefrontScheduler
from tests.conftest import shared_data


def make_tree(
    children: dict[str, list[str]], deps: dict[str, list[str]] | None = None, root: str = "A"
) -> DecompositionTree:
    parents = {c: p for p, cs in children.items() for c in cs}
    ids = [root, *parents]
    nodes: dict[str, Any] = {}
    for cid in ids:
        nodes[cid] = {
            "component_id": cid,
            "name": cid,
            "parent_id": parents.get(cid, ""),
            "children": children.get(cid, []),
            "dependencies": (deps or {}).get(cid, []),
        }
    return tree_from_data({"root_id": root, "nodes": nodes}, "<test>")


def states(**done: list[str]) -> dict[str, ComponentState]:
    """``states(B=["contract"])`` marks B's contract done."""
    return {
        cid: ComponentState(phases={Phase(p): ItemStatus.DONE for p in phases})
        for cid, phases in done.items()
    }


SEED_TREE = {"A": ["B", "C", "D"]}
SEED_DEPS = {"D": ["B"]}


def test_leaves_start_in_parallel() -> None:
    tree = make_tree({"A": ["B", "C", "E"]})
    ready = WavefrontScheduler(tree).compute_ready_set(tree, {})
    assert {("B", "contract"), ("C", "contract"), ("E", "contract")} <= set(ready)


def test_dependent_waits_for_dependency() -> None:
    tree = make_tree(SEED_TREE, SEED_DEPS)
    sched = WavefrontScheduler(tree)
    assert ("D", "contract") not in sched.compute_ready_set(tree, {})
    ready = sched.compute_ready_set(tree, states(B=["contract"]))
    assert ("D", "contract") in ready and ("B", "test") in ready
    # D's implementation waits for B's implementation, not only for D's tests.
    s = states(B=["contract", "test"], D=["contract", "test"])
    assert ("D", "implement") not in sched.compute_ready_set(tree, s)
    s = states(B=["contract", "test", "implement"], D=["contract", "test"])
    assert ("D", "implement") in sched.compute_ready_set(tree, s)


def test_seed_example_waves() -> None:
    tree = make_tree(SEED_TREE, SEED_DEPS)
    sched = WavefrontScheduler(tree)
    waves = []
    while sched.is_active():
        wave = sched.get_ready()
        assert wave, "scheduler stalled"
        waves.append(sorted((c, p.value) for c, p in wave))
        for c, p in wave:
            sched.done(c, p)
    assert waves[0] == [("A", "contract"), ("B", "contract"), ("C", "contract")]
    assert ("D", "contract") in waves[1]
    assert waves[-1] == [("A", "integrate")]


def test_integration_waits_for_all_children() -> None:
    tree = make_tree(SEED_TREE, SEED_DEPS)
    sched = WavefrontScheduler(tree)
    full = ["contract", "test", "implement"]
    s = states(A=["contract", "test"], B=full, C=full, D=["contract", "test"])
    assert ("A", "integrate") not in sched.compute_ready_set(tree, s)
    s = states(A=["contract", "test"], B=full, C=full, D=full)
    assert sched.compute_ready_set(tree, s) == [("A", "integrate")]


def test_respects_max_concurrent() -> None:
    tree = make_tree({"A": ["B", "C", "D", "E", "F"]})
    sched = WavefrontScheduler(tree, max_concurrent_agents=2)
    assert len(sched.compute_ready_set(tree, {})) == 2
    running = {"B": ComponentState(phases={Phase.CONTRACT: ItemStatus.DISPATCHED})}
    assert len(sched.compute_ready_set(tree, running)) == 1
    seen = 0
    while sched.is_active():
        wave = sched.get_ready()
        assert len(wave) <= 2
        for c, p in wave:
            sched.done(c, p)
        seen += len(wave)
    assert seen == 6 * 3


def test_no_deadlock() -> None:
    with pytest.raises(CycleError) as info:
        make_tree({"A": ["B", "C"]}, {"B": ["C"], "C": ["B"]})
    assert info.value.cycle[0] == info.value.cycle[-1]


def test_in_flight_items_are_never_returned_again() -> None:
    tree = make_tree({"A": ["B", "C"]})
    sched = WavefrontScheduler(tree)
    first = sched.get_ready()
    assert first and not set(first) & set(sched.get_ready())


def test_ready_items_have_no_dependency_between_them() -> None:
    tree = make_tree({"A": ["B", "C", "D"]}, {"C": ["B"], "D": ["C"]})
    sched = WavefrontScheduler(tree)
    while sched.is_active():
        wave = sched.get_ready()
        for c, p in wave:
            prereqs = set(sched.graph.prerequisites(c, p))
            assert not prereqs & set(wave)
        for c, p in wave:
            sched.done(c, p)


def test_permanent_failure_poisons_exactly_the_dependents() -> None:
    tree = make_tree({"A": ["B", "C", "D"]}, {"D": ["B"]})
    sched = WavefrontScheduler(tree)
    poisoned = sched.fail("B", "implement")
    assert set(poisoned) == {("D", "implement"), ("A", "integrate")}


def test_phased_mode_holds_each_phase_until_the_last_one_finishes() -> None:
    tree = make_tree({"A": ["B", "C"]}, {"C": ["B"]})
    sched = WavefrontScheduler(tree, mode=SchedulingMode.PHASED)
    first = sched.get_ready()
    assert {p for _, p in first} == {Phase.CONTRACT}
    for c, p in first:
        sched.done(c, p)
    second = sched.get_ready()
    assert ("C", Phase.CONTRACT) in second and all(p is Phase.CONTRACT for _, p in second)


def test_phased_mode_finishes_when_a_leaf_depends_on_a_parent_sibling() -> None:
    # L's implementation waits for P's integration, which phased mode would hold back
    # until every implementation is done: the barrier must not wait for L.
    tree = make_tree({"R": ["P", "L"], "P": ["X"]}, {"L": ["P"]}, root="R")
    sched = WavefrontScheduler(tree, mode=SchedulingMode.PHASED)
    order: list[tuple[str, Phase]] = []
    while sched.is_active():
        wave = sched.get_ready()
        assert wave, f"no progress after {order}"
        order.extend(wave)
        for c, p in wave:
            sched.done(c, p)
    assert order.index(("P", Phase.INTEGRATE)) < order.index(("L", Phase.IMPLEMENT))
    assert all(p is Phase.CONTRACT for _, p in order[:4])


def test_stigmergy_first_ready_set_is_the_components_without_internal_dependencies() -> None:
    tree = load_tree(shared_data("stigmergy", "decomposition", "tree.json"))
    deps = json.loads(shared_data("stigmergy", "dependencies.json").read_text())
    tree = tree.with_dependencies(deps["internal"])
    expected = {(cid, "contract") for cid in tree.nodes if not tree.internal_dependencies(cid)}
    assert len(expected) == 27 - sum(1 for v in deps["internal"].values() if v)
    ready = WavefrontScheduler(tree).compute_ready_set(tree, {})
    assert set(ready) == expected
    assert len(ready) == len(expected)
    # External dependencies block nothing.
    assert any(deps["external"].get(cid) for cid, _ in ready)
