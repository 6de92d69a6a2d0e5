"""Which transition each audit event asks of which item, and the check the fold runs.

:func:`moves` names, for one event, every item it touches with the lifecycle event
and the actor; :func:`check` finds each move's row in the table, judges its guards
and raises :class:`IllegalTransition` when there is no row or a guard fails.
"""

from __future__ import annotations

from dataclasses import dataclass

from pact_workers.errors import RunDirError
from pact_workers.models.work import IN_FLIGHT, ItemStatus, Phase
from scheduler.events import (
    ArtifactsPromoted,
    CacheDropped,
    CacheHit,
    ContractChecked,
    Event,
    ItemDispatched,
    ItemFailed,
    ItemsPoisoned,
    ItemsSuspended,
    ItemSucceeded,
    ResultDropped,
    RunCompleted,
    RunFailed,
    RunPaused,
    RunResumed,
    RunStarted,
)
from scheduler.gates.events import GATE_EVENTS, ReviewDecided, TeachbackReviewed
from scheduler.interview.recorded import InterviewRecorded
from scheduler.lifecycle.events import ItemProgress, RunCancelled
from scheduler.lifecycle.guards import FOLD_GUARDS
from scheduler.lifecycle.table import Actor, Transition, lookup
from scheduler.regression.events import RegressionChecked
from scheduler.state import ItemState, RunState, item_key

#: ``error_type`` of failures the scheduler itself records (a lost or stalled attempt,
#: an interrupted scheduler, inputs that could not be built): the same strings as
#: ``scheduler.policy`` and ``scheduler.state`` use (a test keeps them equal).
SCHEDULER_FAILURES = frozenset({"interrupted", "stalled", "worker_lost", "inputs"})

#: Run-level events: they change no item's state.
RUN_EVENTS = (RunStarted, RunPaused, RunCompleted, RunFailed, InterviewRecorded)


@dataclass(frozen=True)
class Move:
    """One item an event touches, with the lifecycle event and who causes it."""

    component_id: str
    phase: Phase
    event: str
    actor: Actor
    #: The attempt the event is about (the fencing token ``lease_current`` compares).
    attempt: int


class IllegalTransition(RunDirError):
    """An event asks an item for a move the lifecycle table does not allow (a log
    that holds one is not a log this scheduler wrote: bad input, exit code 2)."""

    def __init__(self, message: str, *, seq: int = 0, event_type: str = "") -> None:
        super().__init__(message)
        self.seq = seq
        self.event_type = event_type


def moves(state: RunState, event: Event) -> list[Move]:
    """Every item ``event`` touches; raises :class:`IllegalTransition` for an event type
    the lifecycle does not know."""
    if isinstance(event, RUN_EVENTS):
        return []
    if isinstance(event, ItemDispatched):
        return [_move(event, "dispatch", Actor.SCHEDULER)]
    if isinstance(event, ItemSucceeded):
        return [_move(event, "succeed", Actor.HARNESS)]
    if isinstance(event, ItemFailed):
        name = {"retry": "retry", "pause": "hold", "give_up": "give_up"}[event.decision]
        actor = Actor.SCHEDULER if event.error_type in SCHEDULER_FAILURES else Actor.HARNESS
        return [_move(event, name, actor)]
    if isinstance(event, ContractChecked):
        return [_move(event, "check", Actor.SCHEDULER)]
    if isinstance(event, CacheHit):
        return [_move(event, "cache_hit", Actor.SCHEDULER)]
    if isinstance(event, CacheDropped):
        item = state.items.get(item_key(event.component_id, event.phase))
        redispatch = (
            event.redispatch
            and item is not None
            and item.attempt == event.attempt
            and item.status in IN_FLIGHT
        )
        return [_move(event, "redispatch" if redispatch else "cache_drop", Actor.SCHEDULER)]
    if isinstance(event, ResultDropped):
        if item_key(event.component_id, event.phase) not in state.items:
            return []  # a result for an item this run does not have: nothing to move
        return [_move(event, "drop", Actor.SCHEDULER)]
    if isinstance(event, ArtifactsPromoted):
        return [Move(event.component_id, event.phase, "promote", Actor.SCHEDULER, 0)]
    if isinstance(event, ItemsPoisoned):
        return [Move(c, p, "poison", Actor.SCHEDULER, 0) for c, p in event.items]
    if isinstance(event, ItemsSuspended):
        return [Move(c, p, "suspend", Actor.SCHEDULER, 0) for c, p in event.items]
    if isinstance(event, RunResumed):
        return [Move(c, p, "reset", Actor.HUMAN, 0) for c, p in event.reset_items] + [
            Move(c, p, "redo", Actor.HUMAN, 0) for c, p in event.redo_items
        ]
    if isinstance(event, RegressionChecked):
        return [_move(event, "regression_check", Actor.SCHEDULER)]
    if isinstance(event, RunCancelled):
        return [Move(c, p, "cancel", Actor.HUMAN, 0) for c, p in event.items]
    if isinstance(event, ItemProgress):
        name = "start" if event.status == "running" else "verify"
        return [Move(event.component_id, event.phase, name, Actor.WORKER, event.attempt)]
    gate = gate_move(event)
    if gate is not None:
        return [Move(event.component_id, event.phase, gate[0], gate[1], event.attempt)]
    raise IllegalTransition(
        f"audit event {event.seq or '(unsaved)'} ({event.type}) has no rows in the "
        "lifecycle table: add them to scheduler/lifecycle before the fold applies it",
        seq=event.seq,
        event_type=event.type,
    )


def gate_move(event: Event) -> tuple[str, Actor] | None:
    """The lifecycle event and actor of a gate's event (``scheduler.gates``), or None."""
    if not isinstance(event, GATE_EVENTS):
        return None
    if isinstance(event, TeachbackReviewed):
        verdict = "approve" if event.approved else "reject" if event.final else "correct"
        return f"teachback_{verdict}", Actor.SCHEDULER
    if isinstance(event, ReviewDecided):
        return ("approve" if event.approved else "reject"), Actor.HUMAN
    names = {
        "gate_would_have_blocked": ("would_have_blocked", Actor.SCHEDULER),
        "teachback_submitted": ("teachback_submit", Actor.HARNESS),
        "review_requested": ("await_review", Actor.HARNESS),
        "audit_requested": ("await_audit", Actor.HARNESS),
        "audit_reviewed": ("audit_review", Actor.SCHEDULER),
    }
    return names[event.type]


def check(state: RunState, event: Event) -> list[tuple[ItemState, Transition]]:
    """The row of every move ``event`` asks for, its guards judged.

    Raises:
        IllegalTransition: naming the event, the item, its state and what is wrong.
    """
    checked: list[tuple[ItemState, Transition]] = []
    for move in moves(state, event):
        item = state.items.get(item_key(move.component_id, move.phase))
        where = f"audit event {event.seq or '(unsaved)'} ({event.type})"
        if item is None:
            raise IllegalTransition(
                f"{where} names {move.component_id}/{move.phase.value}, which is not a "
                "work item of this run",
                seq=event.seq,
                event_type=event.type,
            )
        row = lookup(item.status, move.event, move.actor)
        if row is None:
            raise IllegalTransition(
                f"{where}: {move.component_id}/{move.phase.value} cannot go through "
                f"'{move.event}' by the {move.actor.value} from {item.status.value} "
                "(no such row in the lifecycle table, scheduler/lifecycle/table.py); "
                "the log is not one this scheduler wrote: restore it from a backup or "
                "start the run again",
                seq=event.seq,
                event_type=event.type,
            )
        for guard in row.guards:
            judge = FOLD_GUARDS.get(guard)
            if judge is not None and not judge(state, item, move.attempt):
                raise IllegalTransition(
                    f"{where}: {move.component_id}/{move.phase.value} cannot go through "
                    f"'{move.event}' from {item.status.value}: guard {guard.value} fails "
                    f"({_why(guard.value, item, move.attempt)})",
                    seq=event.seq,
                    event_type=event.type,
                )
        checked.append((item, row))
    return checked


def _why(guard: str, item: ItemState, attempt: int) -> str:
    if guard == "lease_current":
        return f"attempt {attempt} is not the current attempt {item.attempt}"
    if guard == "dependencies_met":
        return "a work item it waits for is not done"
    return "the run or the item was cancelled"


_AttemptEvent = (
    ItemDispatched
    | ItemSucceeded
    | ItemFailed
    | ContractChecked
    | CacheHit
    | CacheDropped
    | ResultDropped
    | RegressionChecked
)


def _move(event: _AttemptEvent, name: str, actor: Actor) -> Move:
    return Move(event.component_id, event.phase, name, actor, event.attempt)


def confirm(event: Event, checked: list[tuple[ItemState, Transition]]) -> None:
    """After the fold applied ``event``: every item is where its row says.

    Raises:
        IllegalTransition: a fold handler and the table disagree (a bug, never data).
    """
    for item, row in checked:
        if item.status is not row.target and not _settled(item.status, row.target):
            raise IllegalTransition(
                f"audit event {event.seq or '(unsaved)'} ({event.type}) moved "
                f"{item.component_id}/{item.phase.value} to {item.status.value}, but the "
                f"lifecycle table says '{row.event}' from {row.source.value} leads to "
                f"{row.target.value}",
                seq=event.seq,
                event_type=event.type,
            )


def _settled(status: ItemStatus, target: ItemStatus) -> bool:
    """``status`` is where ``target`` leads at once by the table's readiness rows (a
    pending item whose prerequisites are done is ready, scheduler.lifecycle.ready)."""
    for event in ("prerequisites_met", "prerequisites_unmet"):
        row = lookup(target, event, Actor.SCHEDULER)
        if row is not None and row.target is status:
            return True
    return False
