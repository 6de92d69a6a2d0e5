"""Makespans no schedule can beat, and one a schedule reaches, for the scheduling
benchmark (``bench/scheduling.py``): the floor, the tail bound and the clairvoyant
schedule. Pure functions of the work graph, its latencies and the worker count.
"""

from __future__ import annotations

import heapq
from graphlib import TopologicalSorter

from pact_workers.models.tree import DecompositionTree
from pact_workers.models.work import Phase
from scheduler.executors.simulated import Latency, critical_path_s, total_work_s
from scheduler.wavefront import Key, WorkGraph

#: The wavefront's tie-break between ready items of equal priority: earlier phases first.
PHASE_ORDER = {Phase.CONTRACT: 0, Phase.TEST: 1, Phase.IMPLEMENT: 2, Phase.INTEGRATE: 3}


def floor_s(tree: DecompositionTree, graph: WorkGraph, latency: Latency, workers: int) -> float:
    """max(critical path, (W - r) / w + r), r being the root's integration (its last item).

    Nothing else can run while the root integrates (it waits for every other
    item), so the other W - r seconds of work are done on ``workers`` slots
    before it starts.
    """
    root_last = (
        tree.root_id,
        Phase.INTEGRATE if tree.nodes[tree.root_id].children else Phase.IMPLEMENT,
    )
    r = latency(*root_last)
    work = total_work_s(graph, latency)
    return max(critical_path_s(graph, latency), (work - r) / workers + r)


def tails_s(graph: WorkGraph, latency: Latency) -> dict[Key, float]:
    """q(j) per item: the longest chain of latencies that must follow j to the end."""
    order = list(TopologicalSorter({k: graph.prerequisites(*k) for k in graph.keys}).static_order())
    tail: dict[Key, float] = {}
    for key in reversed(order):
        tail[key] = max((tail[d] + latency(*d) for d in graph.dependents[key]), default=0.0)
    return tail


def tail_bound_s(graph: WorkGraph, latency: Latency, workers: int) -> float:
    """The floor's argument applied to every item, not only the root's integration.

    Let q(j) be the longest chain of work that must follow item j (its dependents,
    theirs, and so on, weighted by latency) and p(j) its own latency. In any
    schedule of makespan C, j ends by C - q(j); so for any T, at least
    max(0, min(p(j), p(j) + q(j) - T)) of j's work lies before C - T, and all of
    that forced work F(T) fits on ``workers`` slots in [0, C - T]:
    C >= T + F(T) / w. T = 0 gives W / w; T = r gives the floor. The bound is
    the largest over T at every q(j) and q(j) + p(j) (where F changes slope),
    and the critical path.
    """
    if workers < 1:
        raise ValueError("workers must be at least 1")
    own = {k: latency(*k) for k in graph.keys}
    tail = tails_s(graph, latency)
    best = critical_path_s(graph, latency)
    for t in {0.0, *tail.values(), *(tail[k] + own[k] for k in graph.keys)}:
        forced = sum(max(0.0, min(own[k], own[k] + tail[k] - t)) for k in graph.keys)
        if forced > 0:
            best = max(best, t + forced / workers)
    return best


def clairvoyant_s(graph: WorkGraph, latency: Latency, workers: int) -> float:
    """Makespan of the wavefront's rule given every item's latency in advance.

    List scheduling as the run loop does it (whenever a slot is free, start the
    ready item with the longest chain of work to the end; ties by phase, then
    id), except that the chains are weighted by each item's true latency rather
    than its phase's mean. Computed directly, not through the run loop. It is a
    schedule that exists, so no optimal makespan is above it: with the tail
    bound it brackets what any scheduler could reach, and the gap between the
    wavefront and it is what not knowing each item's duration costs.
    """
    own = {k: latency(*k) for k in graph.keys}
    tail = tails_s(graph, latency)
    unmet = {k: len(set(graph.prerequisites(*k))) for k in graph.keys}
    dependents = {k: set(graph.dependents[k]) for k in graph.keys}

    def entry(key: Key) -> tuple[float, int, str, Key]:
        return (-(tail[key] + own[key]), PHASE_ORDER[key[1]], key[0], key)

    ready = [entry(k) for k in graph.keys if unmet[k] == 0]
    heapq.heapify(ready)
    running: list[tuple[float, int, Key]] = []
    now_s, seq = 0.0, 0
    while ready or running:
        while ready and len(running) < workers:
            key = heapq.heappop(ready)[3]
            seq += 1
            heapq.heappush(running, (now_s + own[key], seq, key))
        now_s = running[0][0]
        while running and running[0][0] == now_s:
            finished = heapq.heappop(running)[2]
            for nxt in dependents[finished]:
                unmet[nxt] -= 1
                if unmet[nxt] == 0:
                    heapq.heappush(ready, entry(nxt))
    return now_s
