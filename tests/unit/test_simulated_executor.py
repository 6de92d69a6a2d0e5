"""The simulated executor: virtual time, real results, and exact makespans of real runs.

Every time asserted here is virtual: it is computed, not measured, so exact
equality is the right assertion. Wall-clock time is never asserted.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from bench.scheduling import load_stigmergy, simulate
from pact_workers.artifacts import ArtifactStore, MemoryBlobStore
from pact_workers.models.tree import DecompositionTree, tree_from_data
from pact_workers.models.work import ItemStatus, Phase, TaskMessage
from pact_workers.verify import check_implementation_files, verify_contract, verify_test_suite
from scheduler.executors.base import Executor
from scheduler.executors.simulated import (
    MEAN_LATENCY_S,
    Latency,
    SimulatedExecutor,
    VirtualClock,
    critical_path_s,
    lower_bound_s,
    stigmergy_like_latency,
    total_work_s,
)
from scheduler.launch import start_run
from scheduler.project import ProjectDir
from scheduler.run import RunController
from scheduler.settings import Settings
from scheduler.state import RunState, RunStatus
from scheduler.wavefront import SchedulingMode, WorkGraph

PHASE_LATENCY_S = {
    Phase.CONTRACT: 10.0,
    Phase.TEST: 5.0,
    Phase.IMPLEMENT: 20.0,
    Phase.INTEGRATE: 7.0,
}


def by_phase(component_id: str, phase: Phase) -> float:
    return PHASE_LATENCY_S[phase]


def task(component_id: str, phase: Phase = Phase.CONTRACT, attempt: int = 1) -> TaskMessage:
    return TaskMessage(run_id="r1", component_id=component_id, phase=phase, attempt=attempt)


def executor(
    latencies_s: Mapping[str, float],
    *,
    workers: int = 8,
    dependencies: Mapping[str, list[str]] | None = None,
) -> tuple[SimulatedExecutor, VirtualClock, ArtifactStore]:
    clock = VirtualClock()
    store = ArtifactStore(MemoryBlobStore())
    sim = SimulatedExecutor(
        workers=workers,
        store=store,
        clock=clock,
        latency=lambda cid, _phase: latencies_s[cid],
        dependencies=dependencies,
    )
    return sim, clock, store


def small_tree() -> DecompositionTree:
    """A root with leaves ``a`` and ``b``, where ``b`` depends on ``a``."""
    nodes: dict[str, Any] = {
        "root": {"component_id": "root", "name": "Root", "children": ["a", "b"]},
        "a": {"component_id": "a", "name": "A", "parent_id": "root"},
        "b": {"component_id": "b", "name": "B", "parent_id": "root", "dependencies": ["a"]},
    }
    return tree_from_data({"root_id": "root", "nodes": nodes}, "<test>")


def drive(
    root: Path, tree: DecompositionTree, *, workers: int, latency: Latency
) -> tuple[RunState, VirtualClock]:
    project = ProjectDir(root)
    settings = Settings(scheduling=SchedulingMode.WAVEFRONT)
    start_run(project, tree, tree_bytes=b"{}", settings=settings)
    clock = VirtualClock()
    store = project.store()
    sim = SimulatedExecutor(workers=workers, store=store, clock=clock, latency=latency)
    state = RunController(
        project, executor=sim, store=store, settings=settings, clock=clock, sleep=clock.sleep
    ).drive()
    return state, clock


def test_the_simulated_executor_is_an_executor() -> None:
    sim, _, _ = executor({})
    assert isinstance(sim, Executor)
    assert sim.capacity == 8
    assert sim.name == "simulated"


def test_results_come_back_in_completion_time_order_not_submission_order() -> None:
    sim, clock, _ = executor({"slow": 30.0, "fast": 10.0, "middle": 20.0})
    for cid in ("slow", "fast", "middle"):
        sim.submit(task(cid))
    seen = []
    while results := sim.poll(timeout_s=0.5):
        seen += [(r.component_id, clock.now()) for r in results]
    assert seen == [("fast", 10.0), ("middle", 20.0), ("slow", 30.0)]


def test_poll_advances_the_virtual_clock_to_the_next_completion_and_no_further() -> None:
    sim, clock, _ = executor({"a": 100.0, "b": 250.0})
    clock.advance_to(40.0)
    sim.submit(task("a"))  # due at 140
    assert clock.now() == 40.0  # submitting takes no time
    clock.sleep(10.0)
    sim.submit(task("b"))  # due at 300
    assert [r.component_id for r in sim.poll(timeout_s=0.5)] == ["a"]
    assert clock.now() == 140.0
    assert [r.duration_s for r in sim.poll(timeout_s=0.5)] == [250.0]
    assert clock.now() == 300.0


def test_poll_with_nothing_running_returns_nothing_and_leaves_the_clock_alone() -> None:
    sim, clock, _ = executor({})
    assert sim.poll(timeout_s=5.0) == []
    assert clock.now() == 0.0


def test_results_due_at_the_same_instant_come_back_together() -> None:
    sim, clock, _ = executor({"a": 5.0, "b": 5.0, "c": 6.0})
    for cid in ("a", "b", "c"):
        sim.submit(task(cid))
    assert [r.component_id for r in sim.poll(timeout_s=0.0)] == ["a", "b"]
    assert clock.now() == 5.0


def test_a_task_beyond_capacity_waits_for_a_free_slot() -> None:
    sim, clock, _ = executor({"a": 10.0, "b": 10.0}, workers=1)
    sim.submit(task("a"))
    sim.submit(task("b"))
    assert sim.busy == 1
    sim.poll(timeout_s=0.0)
    assert [r.component_id for r in sim.poll(timeout_s=0.0)] == ["b"]
    assert clock.now() == 20.0
    assert [(s.submitted_s, s.start_s, s.end_s) for s in sim.spans] == [
        (0.0, 0.0, 10.0),
        (0.0, 10.0, 20.0),
    ]


def test_the_virtual_clock_never_goes_back() -> None:
    clock = VirtualClock(start_s=5.0)
    clock.sleep(2.5)
    assert clock() == clock.now() == 7.5
    with pytest.raises(ValueError, match="cannot go back"):
        clock.advance_to(7.0)


def test_outputs_are_real_bundles_the_harness_accepts() -> None:
    sim, _, store = executor({"a": 1.0}, dependencies={"a": ["b", "c"]})
    for phase in (Phase.CONTRACT, Phase.TEST, Phase.IMPLEMENT):
        sim.submit(task("a", phase))
    results = {r.phase: r for r in sim.poll(timeout_s=0.0)}
    assert all(r.outcome == "ok" and r.output for r in results.values())
    contract = verify_contract(store.get_bundle(results[Phase.CONTRACT].output or ""), "a")
    assert contract.dependencies == ["b", "c"]
    assert verify_test_suite(store.get_bundle(results[Phase.TEST].output or ""), "a") == 1
    implementation = store.get_bundle(results[Phase.IMPLEMENT].output or "")
    check_implementation_files(implementation, "a")
    assert list(implementation) == ["src/a.py"]


def test_activity_reports_running_attempts_only_when_heartbeats_are_on() -> None:
    sim, _, _ = executor({"a": 10.0})
    sim.submit(task("a", attempt=2))
    assert sim.activity() == [("a", Phase.CONTRACT, 2)]
    sim.heartbeats = False
    assert sim.activity() == []


def test_stigmergy_like_latency_depends_on_component_and_phase_not_call_order() -> None:
    latency = stigmergy_like_latency(seed=7)
    first = [latency(cid, p) for cid in ("x", "y") for p in Phase]
    second = [latency(cid, p) for cid in ("y", "x") for p in reversed(Phase)]
    assert first == list(reversed(second))
    assert stigmergy_like_latency(seed=7)("x", Phase.TEST) == latency("x", Phase.TEST)
    assert stigmergy_like_latency(seed=8)("x", Phase.TEST) != latency("x", Phase.TEST)
    for cid in (f"c{i}" for i in range(200)):
        for phase in Phase:
            assert 0.7 * MEAN_LATENCY_S[phase] <= latency(cid, phase) <= 1.3 * MEAN_LATENCY_S[phase]


def test_lower_bound_of_the_small_tree_is_the_critical_path_or_the_work_per_worker() -> None:
    graph = WorkGraph(small_tree())
    # a.contract 10 -> a.test 5 -> a.implement 20 -> b.implement 20 -> root.integrate 7
    assert critical_path_s(graph, by_phase) == 62.0
    # three contracts, three tests, two implementations, one integration
    assert total_work_s(graph, by_phase) == 3 * 10 + 3 * 5 + 2 * 20 + 7 == 92.0
    assert lower_bound_s(graph, by_phase, workers=1) == 92.0
    assert lower_bound_s(graph, by_phase, workers=10) == 62.0


def test_a_run_on_one_worker_takes_the_sum_of_all_latencies(tmp_path: Path) -> None:
    state, clock = drive(tmp_path, small_tree(), workers=1, latency=by_phase)
    assert state.status is RunStatus.COMPLETED
    assert all(i.status is ItemStatus.DONE for i in state.items.values())
    assert clock.now() == 92.0


def test_a_run_on_many_workers_takes_the_critical_path(tmp_path: Path) -> None:
    state, clock = drive(tmp_path, small_tree(), workers=10, latency=by_phase)
    assert state.status is RunStatus.COMPLETED
    assert clock.now() == 62.0


def test_a_simulated_run_promotes_every_output_into_the_project(tmp_path: Path) -> None:
    state, _ = drive(tmp_path, small_tree(), workers=2, latency=by_phase)
    assert state.status is RunStatus.COMPLETED
    pact = tmp_path / ".pact"
    contract = json.loads((pact / "contracts" / "b" / "interface.json").read_text())
    assert contract["name"] == "B"  # taken from the component spec in the task's inputs
    assert (pact / "contracts" / "b" / "tests" / "contract_test.py").is_file()
    assert (pact / "implementations" / "root" / "src" / "root.py").is_file()


@pytest.mark.slow  # a few seconds of wall time: two real runs, every event fsynced
def test_stigmergy_on_8_workers_wavefront_is_no_slower_than_phased_nor_beats_the_bound() -> None:
    tree, dependencies = load_stigmergy()
    latency = stigmergy_like_latency(seed=1)
    runs = {
        mode: simulate(
            tree, workers=8, mode=mode, latency=latency, dependencies=dependencies, seed=1
        )
        for mode in SchedulingMode
    }
    assert all(run.completed for run in runs.values())
    wavefront = runs[SchedulingMode.WAVEFRONT].makespan_s
    phased = runs[SchedulingMode.PHASED].makespan_s
    assert wavefront <= phased
    assert wavefront >= lower_bound_s(WorkGraph(tree), latency, workers=8)
