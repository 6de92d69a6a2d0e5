"""The lifecycle's own events as the run loop makes them: progress reported by
workers, cancels, and who depends on a promoted component (pure, no servers)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pact_workers.errors import InputError
from pact_workers.models.work import ItemStatus, Phase
from scheduler.events import Event, ItemDispatched, ItemSucceeded, RunResumed, RunStarted
from scheduler.fold import apply
from scheduler.lifecycle.cancel import CancelRequest, cancel_event, fenced_attempts
from scheduler.lifecycle.progress import progress_events
from scheduler.regression.promotion import dependents_of
from scheduler.state import RunState
from tests.runs import star_tree


class Run:
    def __init__(self) -> None:
        self.state = RunState()
        self.log(RunStarted(run_id="r", tree=star_tree(2).model_dump(mode="json")))

    def log(self, event: Event) -> None:
        apply(self.state, event.model_copy(update={"seq": self.state.last_seq + 1}))

    def finish(self, cid: str, phase: Phase) -> None:
        self.log(ItemDispatched(component_id=cid, phase=phase, attempt=1, role="r"))
        self.log(ItemSucceeded(component_id=cid, phase=phase, attempt=1, output="sha256:0"))


def test_progress_moves_the_current_attempt_forward_only() -> None:
    run = Run()
    run.log(ItemDispatched(component_id="c1", phase=Phase.CONTRACT, attempt=1, role="r"))
    key = ("c1", Phase.CONTRACT, 1)
    events = progress_events(run.state, [(key, "agent"), (key, "verify"), (key, "agent")])
    assert [e.status for e in events] == ["running", "verifying"]
    for event in events:
        run.log(event)
    assert run.state.item("c1", Phase.CONTRACT).status is ItemStatus.VERIFYING
    stale = progress_events(run.state, [(("c1", Phase.CONTRACT, 0), "verify")])
    assert stale == []  # another attempt's report moves nothing
    assert progress_events(run.state, [(key, "agent")]) == []  # never backwards


def test_a_whole_run_cancel_fences_what_is_in_flight_and_pauses_the_run() -> None:
    run = Run()
    run.finish("c1", Phase.CONTRACT)
    run.log(ItemDispatched(component_id="c2", phase=Phase.CONTRACT, attempt=1, role="r"))
    event = cancel_event(run.state, CancelRequest(by="alice", reason="why not"))
    assert ("c1", Phase.CONTRACT) not in event.items  # done work stays done
    assert fenced_attempts(run.state, event) == [("c2", Phase.CONTRACT, 1)]
    run.log(event)
    assert run.state.cancelled and run.state.cancelled_by == "alice"
    assert run.state.status.value == "paused" and "alice" in run.state.pause_reason
    assert run.state.item("c2", Phase.CONTRACT).status is ItemStatus.CANCELLED
    run.log(RunResumed(original_status="paused", reset_items=[("c2", Phase.CONTRACT)]))
    assert not run.state.cancelled
    assert run.state.item("c2", Phase.CONTRACT).status is ItemStatus.READY  # waits for nothing


def test_a_cancel_names_items_by_component_or_component_and_phase() -> None:
    run = Run()
    event = cancel_event(run.state, CancelRequest(by="bob", items=["c1/test", "c2"]))
    assert not event.whole_run
    assert set(event.items) == {
        ("c1", Phase.TEST),
        ("c2", Phase.CONTRACT),
        ("c2", Phase.TEST),
        ("c2", Phase.IMPLEMENT),
    }
    with pytest.raises(InputError, match="ghost"):
        cancel_event(run.state, CancelRequest(by="bob", items=["ghost"]))
    with pytest.raises(InputError, match="deploy"):
        cancel_event(run.state, CancelRequest(by="bob", items=["c1/deploy"]))


def test_dependents_are_the_done_components_whose_closure_includes_it() -> None:
    run = Run()
    assert dependents_of(run.state, "c1") == []  # nothing done yet
    for cid in ("c1", "c2"):
        for phase in (Phase.CONTRACT, Phase.TEST, Phase.IMPLEMENT):
            run.finish(cid, phase)
    assert dependents_of(run.state, "c1") == []  # the root has not integrated yet
    for phase in (Phase.CONTRACT, Phase.TEST, Phase.INTEGRATE):
        run.finish("root", phase)
    assert dependents_of(run.state, "c1") == ["root"]


def test_the_metrics_count_in_flight_items_by_what_their_workers_report() -> None:
    from prometheus_client import generate_latest

    from scheduler.metrics import SchedulerMetrics

    run = Run()
    for cid in ("c1", "c2"):
        run.log(ItemDispatched(component_id=cid, phase=Phase.CONTRACT, attempt=1, role="r"))
    for event in progress_events(run.state, [(("c2", Phase.CONTRACT, 1), "verify")]):
        run.log(event)
    metrics = SchedulerMetrics()
    metrics.update([("active", run.state, 0)])
    text = generate_latest(metrics.registry).decode()
    assert 'pact_in_flight_items_by_status{status="dispatched"} 1.0' in text
    assert 'pact_in_flight_items_by_status{status="verifying"} 1.0' in text
    assert 'pact_in_flight_items_by_status{status="running"} 0.0' in text
    # The root's contract waits for nothing and is not in flight: ready.
    assert "pact_items_in_ready_state 1.0" in text


def test_a_resume_voids_a_cancel_request_no_process_took(tmp_path: Path) -> None:
    from scheduler.lifecycle.cancel import REQUEST_FILE, request_cancel
    from scheduler.rebuild import rebuild_state
    from scheduler.resume import compute_resume_strategy, execute_resume
    from tests.runs import RunBuilder

    builder = RunBuilder(tmp_path, star_tree(2))
    builder.complete("c1")
    builder.fail_run("stopped for the test")
    project = builder.close()
    request_cancel(project, CancelRequest(by="alice"))
    state = rebuild_state(project.root)
    execute_resume(state, compute_resume_strategy(state, project))
    assert not (project.pact / REQUEST_FILE).exists()
