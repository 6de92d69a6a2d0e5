"""Fair dispatch across the runs of one scheduler service, within the role slots it has.

Rules: runs take turns in the order given (higher priority first, then the order they
were opened); on its turn a run of priority p dispatches up to p + 1 of its ready
items, critical path first; an item whose role has no slot left is skipped for this
loop (the run's next item may be of another role); turns go round until no run can
dispatch anything more. The slots per role are what the fleet-wide caps grant this
service for the loop (:mod:`scheduler.capacity`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from pact_workers.models.work import ROLE_FOR_PHASE, Phase

__all__ = ["Turn", "dispatch_in_turns"]


@dataclass
class Turn:
    """One run's place in the rounds: its share per round, its ready items, and how to
    dispatch one of them."""

    share: int
    ready: list[tuple[str, Phase]]
    dispatch: Callable[[str, Phase], None]


def dispatch_in_turns(turns: list[Turn], slots: dict[str, int]) -> int:
    """Dispatch in rounds (see the module docstring); ``slots`` is used up in place.
    Returns how many items were dispatched."""
    queues = [t for t in turns if t.ready]
    dispatched = 0
    while queues:
        progressed = False
        for turn in list(queues):
            share = turn.share
            while share and turn.ready:
                cid, phase = turn.ready.pop(0)
                role = ROLE_FOR_PHASE[phase].value
                if slots.get(role, 0) <= 0:
                    continue  # this role is full: skip the item this loop
                turn.dispatch(cid, phase)
                slots[role] -= 1
                share -= 1
                dispatched += 1
                progressed = True
            if not turn.ready:
                queues.remove(turn)
        if not progressed:
            break
    return dispatched
