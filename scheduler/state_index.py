"""Indexes over a run's items, kept up to date event by event.

The run loop asks the same questions after every event: what is in flight, what
waits for a retry and until when, which items failed since the last resume, how
many items are in each status, how long finished attempts took. Answering them by
scanning every item makes each event cost O(items) and a run O(items^2); these
indexes answer them in O(1) (or O(answer)) and are updated in O(1) per status
change by :mod:`scheduler.state`'s ``_set_status`` and friends.

They are derived data: never logged, never in ``state.json``, rebuilt in one pass
by :meth:`StateIndex.build` when a state comes from anywhere but a fold.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pact_workers.models.work import IN_FLIGHT, ItemStatus, Phase

if TYPE_CHECKING:
    from scheduler.state import ItemState, RunState

#: The statuses of an item that waits to be dispatched (ready: its prerequisites are done).
WAITING = frozenset({ItemStatus.PENDING, ItemStatus.READY})
#: Pact's run phases for each item phase (tests are part of the contract phase).
PACT_PHASE = {
    Phase.CONTRACT: "contract",
    Phase.TEST: "contract",
    Phase.IMPLEMENT: "implement",
    Phase.INTEGRATE: "integrate",
}


@dataclass
class StateIndex:
    """See the module docstring. Keys are item keys (``component/phase``)."""

    counts: Counter[ItemStatus] = field(default_factory=Counter)
    #: Items dispatched, running or verifying, in the order they were dispatched.
    in_flight: dict[str, None] = field(default_factory=dict)
    #: Pending items waiting for their ``retry_at``.
    retry_at: dict[str, float] = field(default_factory=dict)
    #: Items not done whose latest failure is newer than the last resume.
    failing: dict[str, None] = field(default_factory=dict)
    #: Items not done, per Pact phase (what the run's phase is derived from).
    open_by_pact_phase: Counter[str] = field(default_factory=Counter)
    #: Sum and count of the durations of done items with a measured duration, per phase.
    done_seconds: dict[Phase, list[float]] = field(default_factory=dict)
    #: Attempts that ended (a result, a failure or a lost attempt), per phase.
    finished_attempts: Counter[Phase] = field(default_factory=Counter)
    #: Item key -> the items waiting for it (scheduler.lifecycle.ready; built on first use).
    dependents: dict[str, list[str]] | None = None

    @classmethod
    def build(cls, state: RunState) -> StateIndex:
        """The index of ``state``, in one pass over its items."""
        index = cls()
        for key, item in state.items.items():
            index.counts[item.status] += 1
            if item.status in IN_FLIGHT:
                index.in_flight[key] = None
            if item.status in WAITING and item.retry_at is not None:
                index.retry_at[key] = item.retry_at
            if item.status is not ItemStatus.DONE:
                index.open_by_pact_phase[PACT_PHASE[item.phase]] += 1
                if item.last_error and item.failed_seq > state.resumed_seq:
                    index.failing[key] = None
            elif item.duration_s > 0:
                index.add_duration(item.phase, item.duration_s)
            finished = item.attempt - (1 if item.status in IN_FLIGHT else 0)
            if finished > 0:
                index.finished_attempts[item.phase] += finished
        return index

    def moved(self, key: str, item: ItemState, new: ItemStatus) -> None:
        """``item`` (key ``key``) goes from its current status to ``new``."""
        old = item.status
        if old is new:
            return
        self.counts[old] -= 1
        self.counts[new] += 1
        if new in IN_FLIGHT:
            self.in_flight[key] = None
        elif old in IN_FLIGHT:
            self.in_flight.pop(key, None)
        if new not in WAITING:
            self.retry_at.pop(key, None)
        if (old is ItemStatus.DONE) != (new is ItemStatus.DONE):
            self.open_by_pact_phase[PACT_PHASE[item.phase]] += -1 if new is ItemStatus.DONE else 1
        if new is ItemStatus.DONE:
            self.failing.pop(key, None)

    def add_duration(self, phase: Phase, seconds: float) -> None:
        total = self.done_seconds.setdefault(phase, [0.0, 0.0])
        total[0] += seconds
        total[1] += 1

    def mean_seconds(self) -> dict[Phase, float]:
        """Mean duration of the finished attempts of each phase that has any."""
        return {phase: s / n for phase, (s, n) in self.done_seconds.items() if n}
