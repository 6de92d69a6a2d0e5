"""The incremental control plane agrees with recomputing everything from scratch.

The ready set kept by counters, the state's indexes kept per status change and the
snapshot-plus-tail fold are each checked against the full computation they replace,
over random trees and random sequences of events.
"""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bench.trees import synthetic_tree
from pact_workers.models.tree import DecompositionTree, tree_from_data
from pact_workers.models.work import IN_FLIGHT, ROLE_FOR_PHASE, ItemStatus, Phase
from scheduler.audit import AuditLog, read_events
from scheduler.events import (
    ItemDispatched,
    ItemFailed,
    ItemSucceeded,
    RunStarted,
)
from scheduler.fold import fold
from scheduler.launch import load_state
from scheduler.lifecycle.guards import dependencies_met
from scheduler.project import ProjectDir
from scheduler.readiness import DISPATCHABLE, PHASE_ORDER, PHASE_RANK, ReadyTracker
from scheduler.snapshot import read_snapshot
from scheduler.state import RunState, item_key
from scheduler.state_index import StateIndex
from scheduler.wavefront import WavefrontScheduler, WorkGraph

STATUSES = [
    ItemStatus.PENDING,
    ItemStatus.DISPATCHED,
    ItemStatus.DONE,
    ItemStatus.FAILED,
    ItemStatus.POISONED,
    ItemStatus.SUSPENDED,
]


def full_ready(
    graph: WorkGraph, status: dict[tuple[str, Phase], ItemStatus], rank: dict
) -> list[tuple[str, Phase]]:
    """The ready set computed from scratch, the way the rules state it."""
    ready = [
        key
        for key in graph.keys
        if status[key] in DISPATCHABLE
        and all(status[p] is ItemStatus.DONE for p in graph.prerequisites(*key))
    ]
    return sorted(ready, key=lambda k: (-rank[k], PHASE_ORDER[k[1]], k[0]))


@settings(max_examples=60, deadline=None)
@given(
    size=st.integers(min_value=1, max_value=60),
    branching=st.integers(min_value=1, max_value=5),
    seed=st.integers(min_value=0, max_value=10_000),
)
def test_the_ready_set_kept_by_counters_equals_the_one_computed_from_scratch(
    size: int, branching: int, seed: int
) -> None:
    tree = tree_from_data(synthetic_tree(size, branching), "<t>")
    graph = WorkGraph(tree)
    tracker = ReadyTracker(graph.keys, graph.prerequisite_map, graph.dependents)
    tracker.rank = graph.rank()
    status = dict.fromkeys(graph.keys, ItemStatus.PENDING)
    rng = random.Random(seed)
    ids = sorted(tree.nodes)
    for _ in range(4 * len(graph.keys)):
        if rng.random() < 0.1 and len(ids) > 1:
            declare(graph, tracker, rng, {p: 1.0 for p in Phase})
            continue
        key = rng.choice(graph.keys)
        new = rng.choice(STATUSES)
        status[key] = new
        tracker.set_status(key, new)
        assert set(tracker.ready()) == set(full_ready(graph, status, tracker.rank))


def declare(
    graph: WorkGraph, tracker: ReadyTracker, rng: random.Random, weights: dict[Phase, float]
) -> None:
    """A contract declares a dependency on another component (skipped when it would
    close a cycle): the graph, the tracker's counts and the raised ranks follow."""
    ids = sorted(graph.tree.nodes)
    cid, dep = rng.sample(ids, 2)
    trial = WorkGraph(graph.tree, {c: [*graph.dependencies[c]] for c in ids})
    trial.add_dependency(cid, dep)
    if _acyclic(trial):
        for edge in graph.add_dependency(cid, dep):
            tracker.add_dependency(*edge)
            tracker.reprioritise(graph.raise_rank(tracker.rank, edge, weights))


def limited_ready(
    graph: WorkGraph,
    status: dict[tuple[str, Phase], ItemStatus],
    rank: dict,
    not_before: dict[tuple[str, Phase], float],
    now: float,
    *,
    slots: int,
    limits: dict[str, int],
    phased: bool,
) -> list[tuple[str, Phase]]:
    """What ``ready(now)`` must return with a slot limit, from scratch: the candidates
    due by ``now`` (in phased mode only up to the earliest phase with a candidate or
    an item in flight), in priority order, cut to the free slots and the role limits."""
    candidates = full_ready(graph, status, rank)
    in_flight = [k for k in graph.keys if status[k] in IN_FLIGHT]
    if phased:
        live = [PHASE_RANK[k[1]] for k in [*candidates, *in_flight]]
        lowest = min(live, default=None)
        candidates = [k for k in candidates if lowest is None or PHASE_RANK[k[1]] <= lowest]
    per_role = Counter(ROLE_FOR_PHASE[k[1]].value for k in in_flight)
    chosen: list[tuple[str, Phase]] = []
    for key in candidates:
        if len(chosen) >= slots - len(in_flight):
            break
        role = ROLE_FOR_PHASE[key[1]].value
        if not_before.get(key, 0.0) > now or per_role[role] >= limits.get(role, 10**9):
            continue
        per_role[role] += 1
        chosen.append(key)
    return chosen


@settings(max_examples=80, deadline=None)
@given(
    size=st.integers(min_value=1, max_value=60),
    branching=st.integers(min_value=1, max_value=6),
    slots=st.integers(min_value=1, max_value=12),
    limit=st.integers(min_value=1, max_value=4),
    phased=st.booleans(),
    seed=st.integers(min_value=0, max_value=10_000),
)
def test_the_ready_items_picked_from_the_heaps_equal_the_ones_sorted_from_scratch(
    size: int, branching: int, slots: int, limit: int, phased: bool, seed: int
) -> None:
    """With a slot limit the tracker takes the best heads of its per-phase heaps; the
    items and their order must be exactly those of sorting every candidate, whatever
    happened before: statuses changed at random (dispatches included), retry times,
    ranks raised along new edges, and all the ranks computed again."""
    rng = random.Random(seed)
    tree = tree_from_data(synthetic_tree(size, branching), "<t>")
    graph = WorkGraph(tree)
    limits = {rng.choice(list(ROLE_FOR_PHASE.values())).value: limit}
    tracker = ReadyTracker(
        graph.keys,
        graph.prerequisite_map,
        graph.dependents,
        phased=phased,
        max_concurrent=slots,
        role_limits=limits,
    )
    tracker.rank = graph.rank()
    status = dict.fromkeys(graph.keys, ItemStatus.PENDING)
    not_before: dict[tuple[str, Phase], float] = {}
    ids = sorted(tree.nodes)
    weights = {p: rng.uniform(0.5, 3.0) for p in Phase}
    for step in range(4 * len(graph.keys)):
        now = float(step)
        roll = rng.random()
        if roll < 0.2 and len(ids) > 1:
            declare(graph, tracker, rng, weights)
        elif roll < 0.22:
            tracker.rank = graph.rank(weights)  # the phase means moved materially
        elif roll < 0.45:
            for key in tracker.ready(now):  # dispatched, as the run loop does
                status[key] = ItemStatus.DISPATCHED
                tracker.set_status(key, ItemStatus.DISPATCHED)
        else:
            key = rng.choice(graph.keys)
            new = rng.choice([*STATUSES, ItemStatus.READY])
            retry = now + rng.choice([-1.0, 2.0]) if rng.random() < 0.3 else None
            status[key] = new
            not_before.pop(key, None)
            if retry is not None:
                not_before[key] = retry
            tracker.set_status(key, new, retry)
        expected = limited_ready(
            graph, status, tracker.rank, not_before, now, slots=slots, limits=limits, phased=phased
        )
        assert tracker.ready(now) == expected


def _acyclic(graph: WorkGraph) -> bool:
    from graphlib import CycleError, TopologicalSorter

    try:
        tuple(TopologicalSorter(graph.prerequisite_map).static_order())
    except CycleError:
        return False
    return True


def test_ranks_raised_along_a_new_edge_equal_ranks_computed_again() -> None:
    tree = tree_from_data(synthetic_tree(200, 4), "<t>")
    graph = WorkGraph(tree)
    weights = {Phase.CONTRACT: 3.0, Phase.TEST: 2.0, Phase.IMPLEMENT: 5.0, Phase.INTEGRATE: 1.0}
    rank = dict(graph.rank(weights))
    rng = random.Random(7)
    leaves = sorted(c for c, n in tree.nodes.items() if n.is_leaf)
    added = 0
    while added < 20:
        cid, dep = rng.sample(leaves, 2)
        trial = WorkGraph(tree, {c: [*graph.dependencies[c]] for c in tree.nodes})
        trial.add_dependency(cid, dep)
        if not _acyclic(trial):
            continue
        for edge in graph.add_dependency(cid, dep):
            graph.raise_rank(rank, edge, weights)
        added += 1
    assert rank == pytest.approx(graph.rank(weights))


def test_the_incremental_scheduler_hands_out_every_item_once_in_dependency_order() -> None:
    tree = tree_from_data(synthetic_tree(300, 6), "<t>")
    core = WavefrontScheduler(tree)
    seen: list[tuple[str, Phase]] = []
    while core.is_active():
        wave = core.get_ready()
        assert wave, "no progress while items remain"
        for key in wave:
            assert all(p in seen for p in core.graph.prerequisites(*key))
        seen.extend(wave)
        for key in wave:
            core.done(*key)
    assert sorted(seen) == sorted(core.graph.keys)


def _random_events(tree: DecompositionTree, rng: random.Random) -> list:
    events: list = [RunStarted(run_id="r", tree=tree.model_dump(mode="json"), seq=1)]
    state = fold(events)
    seq = 1
    for _ in range(400):
        key = rng.choice(list(state.items))
        item = state.items[key]
        seq += 1
        if item.status in {ItemStatus.PENDING, ItemStatus.READY}:
            if not dependencies_met(state, item, item.attempt + 1):
                continue  # the lifecycle refuses to dispatch an item that is not ready
            event = ItemDispatched(
                component_id=item.component_id,
                phase=item.phase,
                attempt=item.attempt + 1,
                role="code_author",
                seq=seq,
            )
        elif item.status is ItemStatus.DISPATCHED:
            if rng.random() < 0.6:
                event = ItemSucceeded(
                    component_id=item.component_id,
                    phase=item.phase,
                    attempt=item.attempt,
                    output="sha256:" + "0" * 64,
                    duration_s=rng.uniform(1, 9),
                    seq=seq,
                )
            else:
                event = ItemFailed(
                    component_id=item.component_id,
                    phase=item.phase,
                    attempt=item.attempt,
                    error_class="transient",
                    error="boom",
                    decision=rng.choice(["retry", "give_up", "pause"]),
                    retry_at=rng.uniform(0, 100),
                    seq=seq,
                )
        else:
            continue
        events.append(event)
        state = fold([event], state)
    return events


@pytest.mark.parametrize("seed", range(8))
def test_indexes_kept_per_event_equal_indexes_built_from_scratch(seed: int) -> None:
    tree = tree_from_data(synthetic_tree(40, 4), "<t>")
    state = fold(_random_events(tree, random.Random(seed)))
    kept, built = state.index, StateIndex.build(state)
    assert kept.counts - built.counts == built.counts - kept.counts
    assert set(kept.in_flight) == set(built.in_flight)  # kept in dispatch order
    assert kept.retry_at == built.retry_at
    assert set(kept.failing) == set(built.failing)
    assert +kept.open_by_pact_phase == +built.open_by_pact_phase
    assert kept.finished_attempts == built.finished_attempts
    assert kept.mean_seconds() == pytest.approx(built.mean_seconds())


def test_a_snapshot_plus_the_log_tail_folds_to_the_full_fold(tmp_path: Path) -> None:
    tree = tree_from_data(synthetic_tree(30, 3), "<t>")
    events = _random_events(tree, random.Random(3))
    project = ProjectDir(tmp_path)
    with AuditLog(project.audit_path) as audit:
        for event in events[:150]:
            audit.stage(event.model_copy(update={"seq": 0}))
        audit.commit()
        project.write_state(fold(read_events(project.audit_path)[0]))
        for event in events[150:]:
            audit.append(event.model_copy(update={"seq": 0}))
    assert read_snapshot(project) is not None
    state, _ = load_state(project)
    full = fold(read_events(project.audit_path)[0])
    assert state.model_dump() == full.model_dump()


def test_a_snapshot_edited_by_hand_or_behind_a_rewritten_log_is_not_trusted(
    tmp_path: Path,
) -> None:
    tree = tree_from_data(synthetic_tree(10, 3), "<t>")
    project = ProjectDir(tmp_path)
    with AuditLog(project.audit_path) as audit:
        audit.append(RunStarted(run_id="r", tree=tree.model_dump(mode="json")))
    project.write_state(fold(read_events(project.audit_path)[0]))
    assert read_snapshot(project) is not None
    raw = project.state_path.read_bytes()
    project.state_path.write_bytes(raw.replace(b'"run_id":"r"', b'"run_id":"x"'))
    assert read_snapshot(project) is None  # its own digest no longer matches
    project.write_state(fold(read_events(project.audit_path)[0]))
    project.audit_path.write_bytes(project.audit_path.read_bytes().replace(b'"r"', b'"q"'))
    assert read_snapshot(project) is None  # the log's tail is not what it marked
    state, _ = load_state(project)
    assert state.run_id == "q"


def test_staged_events_are_not_on_disk_and_effects_wait_for_the_commit(tmp_path: Path) -> None:
    from scheduler.journal import RunJournal

    project = ProjectDir(tmp_path)
    tree = tree_from_data(synthetic_tree(3, 2), "<t>")
    journal = RunJournal(project)
    journal.open()
    done: list[str] = []
    journal.log(RunStarted(run_id="r", tree=tree.model_dump(mode="json")))
    journal.after_commit(lambda: done.append("submitted"))
    assert not project.audit_path.read_bytes() and not done
    journal.commit()
    assert done == ["submitted"]
    assert len(read_events(project.audit_path)[0]) == 1
    journal.log(ItemDispatched(component_id="c0", phase=Phase.CONTRACT, attempt=1, role="x"))
    journal.close()  # staged but never committed: dropped, and no snapshot of it
    assert len(read_events(project.audit_path)[0]) == 1
    assert isinstance(journal.state, RunState) and item_key("c0", "contract") in journal.state.items
