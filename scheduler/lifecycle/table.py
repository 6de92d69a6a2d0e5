"""The transition table: (state, event, actor) -> next state, with guards.

===============  ===========  =========  ===============  ==============================
from             event        actor      to               guards
===============  ===========  =========  ===============  ==============================
pending          prerequi-    scheduler  ready            dependencies_met
                 sites_met
ready            prerequi-    scheduler  pending          (a prerequisite is not done
                 sites_unmet                              any more: a redo)
pending,         dispatch     scheduler  dispatched       dependencies_met, budget_left,
ready                                                     not_cancelled
dispatched       start        worker     running          lease_current
dispatched,      verify       worker     verifying        lease_current
running
in flight        succeed      harness    done             lease_current
in flight        retry        harness,   pending          lease_current, can_retry
                              scheduler
in flight        hold         harness,   pending          lease_current
                              scheduler
in flight        give_up      harness,   failed           lease_current
                              scheduler
pending          give_up      scheduler  failed           (inputs could not be built)
in flight        redispatch   scheduler  pending          lease_current
in flight        check,       scheduler  (unchanged)      lease_current
                 cache_hit
pending,         poison       scheduler  poisoned
suspended,
poisoned
pending          suspend      scheduler  suspended
failed,          reset        human      pending
poisoned,
suspended,
pending,
cancelled
pending,         cancel       human      cancelled
suspended,
in flight,
awaiting_review
===============  ===========  =========  ===============  ==============================

A row whose target is ``pending`` ends in ``ready`` when the item's prerequisites are
met (the fold applies ``prerequisites_met`` at once); a ready item may be given up,
poisoned, suspended, reset or cancelled as a pending one.

Plus rows that leave the state unchanged: a finished item is neither poisoned,
suspended, reset nor cancelled; ``promote`` applies to a done item; ``drop`` (a late
or foreign result logged and ignored) and ``cache_drop`` to an item in any state.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum

from pydantic import BaseModel, ConfigDict

from pact_workers.models.work import IN_FLIGHT, ItemStatus

S = ItemStatus


class Actor(StrEnum):
    """Who causes a transition."""

    SCHEDULER = "scheduler"
    WORKER = "worker"
    HARNESS = "harness"
    HUMAN = "human"


class Guard(StrEnum):
    """Conditions a transition needs (see :mod:`scheduler.lifecycle.guards`)."""

    CAN_RETRY = "can_retry"
    DEPENDENCIES_MET = "dependencies_met"
    LEASE_CURRENT = "lease_current"
    BUDGET_LEFT = "budget_left"
    NOT_CANCELLED = "not_cancelled"


#: Every guard, in the order they are checked.
GUARDS = tuple(Guard)


class Transition(BaseModel):
    """One row of the table."""

    model_config = ConfigDict(frozen=True)

    source: ItemStatus
    event: str
    actor: Actor
    target: ItemStatus
    guards: tuple[Guard, ...] = ()


_FLIGHT = sorted(IN_FLIGHT, key=list(ItemStatus).index)
_FINISHED = [S.DONE, S.FAILED, S.POISONED, S.CANCELLED]
_ALL = list(ItemStatus)


def _rows(
    sources: Iterable[ItemStatus],
    event: str,
    actors: Iterable[Actor],
    target: ItemStatus | None = None,
    guards: tuple[Guard, ...] = (),
) -> list[Transition]:
    """Rows for every (source, actor); ``target`` None: the state stays as it is."""
    return [
        Transition(
            source=source,
            event=event,
            actor=actor,
            target=source if target is None else target,
            guards=guards,
        )
        for source in sources
        for actor in actors
    ]


_SCHED = [Actor.SCHEDULER]
_OUTCOME = [Actor.HARNESS, Actor.SCHEDULER]
_LEASE = (Guard.LEASE_CURRENT,)

TRANSITIONS: tuple[Transition, ...] = tuple(
    [
        # Ready: pending with every prerequisite done (scheduler.lifecycle.ready).
        *_rows([S.PENDING], "prerequisites_met", _SCHED, S.READY, (Guard.DEPENDENCIES_MET,)),
        *_rows([S.READY], "prerequisites_unmet", _SCHED, S.PENDING),
        *_rows(
            [S.PENDING, S.READY],
            "dispatch",
            _SCHED,
            S.DISPATCHED,
            (Guard.DEPENDENCIES_MET, Guard.BUDGET_LEFT, Guard.NOT_CANCELLED),
        ),
        *_rows([S.DISPATCHED], "start", [Actor.WORKER], S.RUNNING, _LEASE),
        *_rows([S.DISPATCHED, S.RUNNING], "verify", [Actor.WORKER], S.VERIFYING, _LEASE),
        *_rows(_FLIGHT, "succeed", [Actor.HARNESS], S.DONE, _LEASE),
        *_rows(_FLIGHT, "retry", _OUTCOME, S.PENDING, (Guard.LEASE_CURRENT, Guard.CAN_RETRY)),
        *_rows(_FLIGHT, "hold", _OUTCOME, S.PENDING, _LEASE),
        *_rows(_FLIGHT, "give_up", _OUTCOME, S.FAILED, _LEASE),
        *_rows([S.PENDING, S.READY], "give_up", _SCHED, S.FAILED),
        *_rows(_FLIGHT, "redispatch", _SCHED, S.PENDING, _LEASE),
        *_rows(_FLIGHT, "check", _SCHED, None, _LEASE),
        *_rows(_FLIGHT, "cache_hit", _SCHED, None, _LEASE),
        *_rows(_ALL, "cache_drop", _SCHED),
        *_rows([S.PENDING, S.READY, S.SUSPENDED, S.POISONED], "poison", _SCHED, S.POISONED),
        *_rows([S.DONE, S.FAILED, S.CANCELLED], "poison", _SCHED),
        *_rows([S.PENDING, S.READY], "suspend", _SCHED, S.SUSPENDED),
        *_rows([s for s in _ALL if s not in {S.PENDING, S.READY}], "suspend", _SCHED),
        *_rows(
            [S.FAILED, S.POISONED, S.SUSPENDED, S.PENDING, S.READY, S.CANCELLED],
            "reset",
            [Actor.HUMAN],
            S.PENDING,
        ),
        *_rows([S.DONE], "reset", [Actor.HUMAN]),
        *_rows([S.DONE], "redo", [Actor.HUMAN], S.PENDING),
        *_rows(
            [S.PENDING, S.READY, S.SUSPENDED, *_FLIGHT, S.AWAITING_REVIEW],
            "cancel",
            [Actor.HUMAN],
            S.CANCELLED,
        ),
        *_rows(_FINISHED, "cancel", [Actor.HUMAN]),
        *_rows([S.DONE], "promote", _SCHED),
        # The regression check before a promotion (scheduler.regression).
        *_rows(_FLIGHT, "regression_check", _SCHED, None, _LEASE),
        *_rows(_ALL, "drop", _SCHED),
        # The gates (scheduler.gates): a teachback reviewed, an item held for a human.
        *_rows([S.PENDING, S.READY], "would_have_blocked", _SCHED),
        *_rows(_FLIGHT, "teachback_submit", [Actor.HARNESS], None, _LEASE),
        *_rows(_FLIGHT, "teachback_approve", _SCHED, S.PENDING, _LEASE),
        *_rows(_FLIGHT, "teachback_correct", _SCHED, S.PENDING, _LEASE),
        *_rows(_FLIGHT, "teachback_reject", _SCHED, None, _LEASE),
        *_rows(_FLIGHT, "await_review", [Actor.HARNESS], S.AWAITING_REVIEW, _LEASE),
        *_rows([S.AWAITING_REVIEW], "approve", [Actor.HUMAN], S.DONE),
        *_rows([S.AWAITING_REVIEW], "reject", [Actor.HUMAN], S.PENDING),
        *_rows(_FLIGHT, "await_audit", [Actor.HARNESS], S.PENDING, _LEASE),
        *_rows(_FLIGHT, "audit_review", _SCHED, None, _LEASE),
    ]
)

_INDEX: dict[tuple[ItemStatus, str, Actor], Transition] = {
    (t.source, t.event, t.actor): t for t in TRANSITIONS
}
if len(_INDEX) != len(TRANSITIONS):  # pragma: no cover - a typo in the table above
    raise RuntimeError("the transition table has two rows for one (state, event, actor)")

#: Every lifecycle event the table knows.
EVENTS = frozenset(t.event for t in TRANSITIONS)


def lookup(source: ItemStatus, event: str, actor: Actor) -> Transition | None:
    """The row for (``source``, ``event``, ``actor``), or None: the move is illegal."""
    return _INDEX.get((source, event, actor))
