"""The work item lifecycle as an explicit state machine (seed 004, stead's contract
state machine with guards and actors).

Rules:

- One table (:data:`~scheduler.lifecycle.table.TRANSITIONS`) says, for every
  (state, event, actor), the next state and the guards that must hold. Nothing else
  decides where an item may go: the fold (:mod:`scheduler.fold`) asks
  :func:`~scheduler.lifecycle.machine.check` before applying any event, and an event
  without a row for the item's state and the event's actor is refused with
  :class:`IllegalTransition` (never applied silently).
- Events are the audit log's, named by what they do to one item: ``item_failed``
  with the decision ``retry`` is the lifecycle event ``retry``, ``items_poisoned``
  is ``poison`` for each item it names, and so on (:func:`~scheduler.lifecycle.machine.moves`).
- Actors: the ``scheduler`` (dispatch, poison, promotion, lost leases), the
  ``worker`` (reports that an attempt runs or verifies, through its lease), the
  ``harness`` (the verified outcome of an attempt) and a ``human`` (cancel, resume).
- Guards are pure predicates of the state and the event. ``lease_current``,
  ``dependencies_met`` and ``not_cancelled`` are checked by the fold on every event,
  replay included. ``can_retry`` and ``budget_left`` depend on settings a user may
  change between resumes: the scheduler's policy evaluates them when it decides and
  records the decision in the event, so that replaying a log needs no policy.
- The state diagram in the docs is generated from the table
  (:func:`~scheduler.lifecycle.diagram.mermaid`); a test checks they match.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pact_workers.exports import lazy_exports

__all__ = [
    "GUARDS",
    "TRANSITIONS",
    "Actor",
    "Guard",
    "IllegalTransition",
    "Move",
    "Transition",
    "check",
    "confirm",
    "lookup",
    "mermaid",
    "moves",
]

# Loaded on first use: ``scheduler.events`` imports ``scheduler.lifecycle.events``,
# which imports this package first, and the machine imports ``scheduler.events``
# back. Importing the machine here made every order but "lifecycle first" fail.
_SUBMODULES = {
    "GUARDS": "scheduler.lifecycle.table",
    "TRANSITIONS": "scheduler.lifecycle.table",
    "Actor": "scheduler.lifecycle.table",
    "Guard": "scheduler.lifecycle.table",
    "IllegalTransition": "scheduler.lifecycle.machine",
    "Move": "scheduler.lifecycle.machine",
    "Transition": "scheduler.lifecycle.table",
    "check": "scheduler.lifecycle.machine",
    "confirm": "scheduler.lifecycle.machine",
    "lookup": "scheduler.lifecycle.table",
    "mermaid": "scheduler.lifecycle.diagram",
    "moves": "scheduler.lifecycle.machine",
}

if TYPE_CHECKING:
    from scheduler.lifecycle.diagram import mermaid
    from scheduler.lifecycle.machine import IllegalTransition, Move, check, confirm, moves
    from scheduler.lifecycle.table import (
        GUARDS,
        TRANSITIONS,
        Actor,
        Guard,
        Transition,
        lookup,
    )

__getattr__, __dir__ = lazy_exports(globals(), _SUBMODULES)
