"""The item lifecycle's transition table (``scheduler.lifecycle``): the fold applies
only moves the table allows, the docs' diagram is the table's, and a damaged log
folds as far as it goes."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import BaseModel

from pact_workers.models.work import ErrorClass, ItemStatus, Phase
from scheduler import policy
from scheduler.events import (
    ArtifactsPromoted,
    Event,
    ItemDispatched,
    ItemFailed,
    ItemsPoisoned,
    ItemSucceeded,
    RunResumed,
    RunStarted,
)
from scheduler.fold import apply
from scheduler.lifecycle import (
    TRANSITIONS,
    Actor,
    IllegalTransition,
    lookup,
    mermaid,
    moves,
)
from scheduler.lifecycle.diagram import block
from scheduler.lifecycle.guards import budget_left, can_retry, prerequisites
from scheduler.lifecycle.machine import SCHEDULER_FAILURES
from scheduler.state import INTERRUPTED, ItemState, RunState
from tests.runs import star_tree

DOCS = Path(__file__).parents[2] / "docs" / "lifecycle.md"


class Run:
    def __init__(self) -> None:
        self.state = RunState()
        self.log(RunStarted(run_id="r", tree=star_tree(2).model_dump(mode="json")))

    def log(self, event: Event) -> None:
        apply(self.state, event.model_copy(update={"seq": self.state.last_seq + 1}))

    def dispatch(self, cid: str, phase: Phase, attempt: int = 1) -> None:
        self.log(ItemDispatched(component_id=cid, phase=phase, attempt=attempt, role="r"))

    def succeed(self, cid: str, phase: Phase, attempt: int = 1) -> None:
        self.log(ItemSucceeded(component_id=cid, phase=phase, attempt=attempt, output="sha256:0"))


def test_a_result_for_an_item_never_dispatched_is_refused_with_the_item_and_state_named() -> None:
    run = Run()
    with pytest.raises(
        IllegalTransition, match=r"c1/contract cannot go through 'succeed'.*from ready"
    ):
        run.succeed("c1", Phase.CONTRACT)
    # Waiting for nothing, as the run started: ready.
    assert run.state.item("c1", Phase.CONTRACT).status is ItemStatus.READY
    assert run.state.last_seq == 1  # nothing of the refused event was applied


def test_a_result_of_an_old_attempt_fails_the_lease_current_guard() -> None:
    run = Run()
    run.dispatch("c1", Phase.CONTRACT, attempt=1)
    run.log(
        ItemFailed(
            component_id="c1",
            phase=Phase.CONTRACT,
            attempt=1,
            error_class=ErrorClass.TRANSIENT,
            error_type=INTERRUPTED,
            decision="retry",
        )
    )
    run.dispatch("c1", Phase.CONTRACT, attempt=2)
    with pytest.raises(IllegalTransition, match="guard lease_current fails"):
        run.succeed("c1", Phase.CONTRACT, attempt=1)
    run.succeed("c1", Phase.CONTRACT, attempt=2)
    assert run.state.item("c1", Phase.CONTRACT).status is ItemStatus.DONE


def test_dispatching_an_item_whose_prerequisites_are_not_done_fails_dependencies_met() -> None:
    run = Run()
    with pytest.raises(IllegalTransition, match="guard dependencies_met fails"):
        run.dispatch("c1", Phase.TEST)
    run.dispatch("c1", Phase.CONTRACT)
    run.succeed("c1", Phase.CONTRACT)
    run.dispatch("c1", Phase.TEST)
    assert run.state.item("c1", Phase.TEST).status is ItemStatus.DISPATCHED


def test_an_event_type_without_rows_is_refused() -> None:
    class Stranger(BaseModel):
        type: str = "stranger"
        seq: int = 9
        component_id: str = "c1"

    run = Run()
    with pytest.raises(IllegalTransition, match="stranger.*no rows in the lifecycle table"):
        moves(run.state, Stranger())  # type: ignore[arg-type]


def test_a_finished_item_is_not_poisoned_and_a_resume_leaves_done_work_alone() -> None:
    run = Run()
    run.dispatch("c1", Phase.CONTRACT)
    run.succeed("c1", Phase.CONTRACT)
    run.log(ArtifactsPromoted(component_id="c1", phase=Phase.CONTRACT, paths=[]))
    run.log(
        ItemsPoisoned(
            root_component="c2",
            root_phase=Phase.CONTRACT,
            items=[("c1", Phase.CONTRACT), ("c1", Phase.TEST)],
        )
    )
    assert run.state.item("c1", Phase.CONTRACT).status is ItemStatus.DONE
    assert run.state.item("c1", Phase.TEST).status is ItemStatus.POISONED
    run.log(
        RunResumed(
            original_status="failed", reset_items=[("c1", Phase.CONTRACT), ("c1", Phase.TEST)]
        )
    )
    assert run.state.item("c1", Phase.CONTRACT).status is ItemStatus.DONE
    # Reset, and its contract done: ready.
    assert run.state.item("c1", Phase.TEST).status is ItemStatus.READY


def test_only_a_human_s_redo_reopens_done_work_and_a_cancelled_item_is_never_dispatched() -> None:
    for row in TRANSITIONS:
        assert row.actor in set(Actor)
        if row.source is ItemStatus.DONE and row.target is not row.source:
            # Only a human's redo reopens verified work.
            assert (row.event, row.actor) == ("redo", Actor.HUMAN), row
    assert lookup(ItemStatus.DONE, "succeed", Actor.HARNESS) is None
    assert lookup(ItemStatus.CANCELLED, "dispatch", Actor.SCHEDULER) is None
    cancel = lookup(ItemStatus.RUNNING, "cancel", Actor.HUMAN)
    assert cancel is not None and cancel.target is ItemStatus.CANCELLED


def test_the_diagram_in_the_docs_is_the_one_generated_from_the_table() -> None:
    assert block() in DOCS.read_text(encoding="utf-8"), (
        "docs/lifecycle.md is out of date: paste `python -m scheduler.lifecycle.diagram`"
    )
    drawn = [line for line in mermaid().splitlines() if "-->" in line and "[*]" not in line]
    changing = {(r.source, r.target) for r in TRANSITIONS if r.source is not r.target}
    assert len(drawn) == len(changing)


def test_the_scheduler_s_own_failure_types_are_the_policy_s() -> None:
    assert {INTERRUPTED, policy.STALLED, policy.WORKER_LOST, "inputs"} == SCHEDULER_FAILURES


def test_policy_guards_say_when_retries_and_budget_are_left() -> None:
    item = ItemState(component_id="c1", phase=Phase.IMPLEMENT, rejections=1)
    assert can_retry(item, error_class=ErrorClass.PERMANENT, max_retries=3, max_attempts=3)
    assert not can_retry(item, error_class=ErrorClass.PERMANENT, max_retries=3, max_attempts=2)
    item = ItemState(component_id="c1", phase=Phase.IMPLEMENT, transient_failures=3)
    assert not can_retry(item, error_class=ErrorClass.TRANSIENT, max_retries=3, max_attempts=3)
    assert budget_left(0.5, None) and budget_left(0.5, 1.0) and not budget_left(1.0, 1.0)


def test_prerequisites_follow_the_wavefront_rules() -> None:
    run = Run()
    assert prerequisites(run.state, "root", Phase.INTEGRATE) == [
        "root/test",
        "c1/implement",
        "c2/implement",
    ]
    assert prerequisites(run.state, "c1", Phase.TEST) == ["c1/contract"]
