"""The generated deep trees of the scheduling benchmark: their definition, and their bounds."""

from __future__ import annotations

import statistics

import pytest

from bench.bounds import clairvoyant_s, floor_s, tail_bound_s
from bench.scheduling import generated_tree, lognormal_latency
from bench.trees import DEEP_MIN_INDEPENDENT_LEAVES, deep_tree, independent_leaves
from pact_workers.models.tree import tree_from_data
from pact_workers.models.work import Phase
from scheduler.executors.simulated import MEAN_LATENCY_S, critical_path_s, lower_bound_s
from scheduler.wavefront import WorkGraph

FAMILY = range(50)


def test_the_same_seed_gives_the_same_tree_and_another_seed_another() -> None:
    assert deep_tree(7) == deep_tree(7)
    assert deep_tree(7) != deep_tree(8)


@pytest.mark.parametrize("seed", FAMILY)
def test_every_tree_of_the_family_is_deep_chained_and_has_independent_leaves(seed: int) -> None:
    data = deep_tree(seed)
    tree = tree_from_data(data, f"deep-{seed}")
    nodes = data["nodes"]
    assert max(node["depth"] for node in nodes.values()) >= 4
    assert len(independent_leaves(nodes)) >= DEEP_MIN_INDEPENDENT_LEAVES
    assert all(len(n.children) >= 2 for n in tree.nodes.values() if n.children)
    for cid, node in tree.nodes.items():
        for dep in node.dependencies:
            # Sibling dependencies only, and never a leaf waiting for a parent.
            assert tree.nodes[dep].parent_id == node.parent_id
            assert node.children or not tree.nodes[dep].children, (cid, dep)
    assert any(node.dependencies for node in tree.nodes.values())


def test_lognormal_latencies_are_fixed_per_item_and_keep_each_phase_mean() -> None:
    latency = lognormal_latency(3)
    assert latency("c1", Phase.TEST) == lognormal_latency(3)("c1", Phase.TEST)
    assert latency("c1", Phase.TEST) != lognormal_latency(4)("c1", Phase.TEST)
    for phase, mean_s in MEAN_LATENCY_S.items():
        draws = [latency(f"c{i}", phase) for i in range(4000)]
        assert min(draws) > 0
        assert statistics.fmean(draws) == pytest.approx(mean_s, rel=0.05)


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("workers", [2, 8, 16])
def test_the_bounds_are_ordered_and_a_schedule_exists_above_them(seed: int, workers: int) -> None:
    t = generated_tree(seed)
    graph = WorkGraph(t.tree)
    latency = lognormal_latency(seed)
    bound = lower_bound_s(graph, latency, workers)
    floor = floor_s(t.tree, graph, latency, workers)
    tail = tail_bound_s(graph, latency, workers)
    slack = 1e-9 * tail  # the same sums, added in another order
    assert critical_path_s(graph, latency) <= bound <= floor <= tail + slack
    assert tail <= clairvoyant_s(graph, latency, workers) + slack
