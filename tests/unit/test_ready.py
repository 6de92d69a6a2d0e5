"""READY is real (scheduler.lifecycle.ready): the fold moves an item to ``ready`` when
every item it waits for is done and back when one is not done any more, incrementally,
and the table's rows say so."""

from __future__ import annotations

from pact_workers.models.work import ErrorClass, ItemStatus, Phase
from scheduler.events import (
    Event,
    ItemDispatched,
    ItemFailed,
    ItemSucceeded,
    RunResumed,
    RunStarted,
)
from scheduler.fold import apply
from scheduler.lifecycle import Actor, lookup
from scheduler.state import RunState
from scheduler.state_index import StateIndex
from tests.runs import star_tree

P = ItemStatus.PENDING
R = ItemStatus.READY


class Run:
    def __init__(self) -> None:
        self.state = RunState()
        self.log(RunStarted(run_id="r", tree=star_tree(2).model_dump(mode="json")))

    def log(self, event: Event) -> None:
        apply(self.state, event.model_copy(update={"seq": self.state.last_seq + 1}))

    def done(self, cid: str, phase: Phase) -> None:
        attempt = self.state.item(cid, phase).attempt + 1
        self.log(ItemDispatched(component_id=cid, phase=phase, attempt=attempt, role="r"))
        self.log(ItemSucceeded(component_id=cid, phase=phase, attempt=attempt, output="sha256:0"))

    def status(self, cid: str, phase: Phase) -> ItemStatus:
        return self.state.item(cid, phase).status

    def counts_match_a_rebuild(self) -> bool:
        return +self.state.index.counts == +StateIndex.build(self.state).counts


def test_an_item_is_ready_once_every_item_it_waits_for_is_done() -> None:
    run = Run()
    # At the start only what waits for nothing is ready: the contracts.
    assert [run.status(c, Phase.CONTRACT) for c in ("c1", "c2", "root")] == [R, R, R]
    assert run.status("c1", Phase.TEST) is P and run.status("c1", Phase.IMPLEMENT) is P
    run.done("c1", Phase.CONTRACT)
    assert run.status("c1", Phase.TEST) is R and run.status("c1", Phase.IMPLEMENT) is P
    run.done("c1", Phase.TEST)
    assert run.status("c1", Phase.IMPLEMENT) is R
    assert run.status("root", Phase.INTEGRATE) is P  # its children are not done
    assert run.counts_match_a_rebuild()


def test_a_redo_sends_the_items_waiting_for_a_component_back_to_pending() -> None:
    run = Run()
    for cid in ("c1", "c2", "root"):
        run.done(cid, Phase.CONTRACT)
        run.done(cid, Phase.TEST)
    run.done("c1", Phase.IMPLEMENT)
    assert run.status("root", Phase.INTEGRATE) is P
    run.done("c2", Phase.IMPLEMENT)
    assert run.status("root", Phase.INTEGRATE) is R
    run.log(RunResumed(original_status="completed", redo_items=[("c1", Phase.IMPLEMENT)]))
    # c1's implementation is to be done again (its own prerequisites are done) and the
    # integration that waits for it is not ready any more.
    assert run.status("c1", Phase.IMPLEMENT) is R
    assert run.status("root", Phase.INTEGRATE) is P
    assert run.counts_match_a_rebuild()


def test_an_attempt_to_retry_is_ready_again_through_the_table() -> None:
    run = Run()
    run.log(ItemDispatched(component_id="c1", phase=Phase.CONTRACT, attempt=1, role="r"))
    run.log(
        ItemFailed(
            component_id="c1",
            phase=Phase.CONTRACT,
            attempt=1,
            error_class=ErrorClass.TRANSIENT,
            error_type="Timeout",
            decision="retry",
            retry_at=5.0,
        )
    )
    item = run.state.item("c1", Phase.CONTRACT)
    assert item.status is R and item.retry_at == 5.0
    assert run.state.index.retry_at == {"c1/contract": 5.0}  # the retry time still holds it
    # The table's rows: retry leads to pending, which leads to ready when met.
    retry = lookup(ItemStatus.DISPATCHED, "retry", Actor.HARNESS)
    assert retry is not None and retry.target is P
    met = lookup(P, "prerequisites_met", Actor.SCHEDULER)
    assert met is not None and met.target is R
    unmet = lookup(R, "prerequisites_unmet", Actor.SCHEDULER)
    assert unmet is not None and unmet.target is P
    assert lookup(R, "dispatch", Actor.SCHEDULER) is not None
    assert lookup(R, "cancel", Actor.HUMAN) is not None
