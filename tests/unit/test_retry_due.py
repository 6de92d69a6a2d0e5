"""A retry that falls due while the run loop looks: the loop reads the clock when it
picks ready items and again when it decides whether anything is left to wait for.
An item whose retry time lies between the two reads was neither ready at the first
nor waited for at the second; the run must dispatch it, not end as stuck (seen on a
fleet run: ``run_failed: no item can make progress`` with the item ``ready``)."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from pact_workers.models.tree import tree_from_data
from pact_workers.models.work import ErrorClass, Phase, ResultMessage, TaskMessage
from scheduler.audit import iter_events
from scheduler.events import ItemFailed, RunCompleted, RunFailed
from scheduler.executors.simulated import SimulatedExecutor, TaskSpan, VirtualClock
from scheduler.launch import start_run
from scheduler.project import ProjectDir
from scheduler.run import RunController
from scheduler.settings import Settings
from scheduler.wavefront import WavefrontScheduler

TREE = {
    "root_id": "root",
    "nodes": {
        "root": {"component_id": "root", "name": "root", "children": ["a", "b"]},
        "a": {"component_id": "a", "name": "a", "parent_id": "root"},
        "b": {"component_id": "b", "name": "b", "parent_id": "root"},
    },
}


class FailsOnce(SimulatedExecutor):
    """``a``'s first contract attempt fails transiently, at once."""

    def _result(self, task: TaskMessage, span: TaskSpan) -> ResultMessage:
        if (task.component_id, task.phase, task.attempt) == ("a", Phase.CONTRACT, 1):
            return ResultMessage(
                run_id=task.run_id,
                component_id="a",
                phase=Phase.CONTRACT,
                attempt=1,
                outcome="error",
                error_class=ErrorClass.TRANSIENT,
                error_type="rate_limited",
                error="429 from the provider",
            )
        return super()._result(task, span)


def test_a_retry_due_between_the_loops_two_looks_at_the_clock_is_dispatched(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = ProjectDir(tmp_path / "project")
    tree = tree_from_data(TREE, "<test>")
    settings = Settings(backoff_base_s=30.0, cache="off")
    start_run(project, tree, tree_bytes=b"{}", settings=settings)
    clock = VirtualClock()
    store = project.store()
    executor = FailsOnce(
        workers=2, store=store, clock=clock, latency=lambda c, p: 0.0 if c == "a" else 1.0
    )
    controller = RunController(
        project,
        executor=executor,
        store=store,
        settings=settings,
        clock=clock,
        sleep=clock.sleep,
        rng=random.Random(1),
    )

    # When the loop finds nothing ready and nothing in flight, with a retry to wait
    # for, its pick of ready items took a moment: the clock passed the retry time.
    picked = WavefrontScheduler.ready_for_state
    slow: list[float] = []

    def slow_pick(self: WavefrontScheduler, state: Any, **kwargs: Any) -> Any:
        ready = picked(self, state, **kwargs)
        later = [t for t in state.retry_times() if t > clock.now()]
        if not ready and not state.in_flight() and later:
            slow.append(min(later))
            clock.advance_to(min(later) + 0.001)
        return ready

    monkeypatch.setattr(WavefrontScheduler, "ready_for_state", slow_pick)
    state = controller.drive()

    events = list(iter_events(project.audit_path))
    assert not [e for e in events if isinstance(e, RunFailed)]
    assert isinstance(events[-1], RunCompleted) and state.status.value == "completed"
    failed = [e for e in events if isinstance(e, ItemFailed)]
    assert [(e.component_id, e.phase, e.attempt) for e in failed] == [("a", Phase.CONTRACT, 1)]
    assert state.item("a", Phase.CONTRACT).attempt == 2
    assert len(slow) == 1  # the moment this test is about did happen
