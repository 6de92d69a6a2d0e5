"""How far a run has come, for whoever follows it while it works: the CLI's progress
bar and the MCP server's progress notifications.

Counting reads the state's index (a count per status), never every item, so following
a run of 10,000 components costs nothing per event.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from pact_workers.models.work import ItemStatus
from scheduler.events import (
    Event,
    ItemDispatched,
    ItemFailed,
    ItemSucceeded,
    RunCompleted,
    RunFailed,
    RunPaused,
)
from scheduler.lifecycle.events import RunCancelled
from scheduler.state import RunState

#: The statuses an item ends a drive in: what "finished" counts.
FINISHED = frozenset({ItemStatus.DONE, ItemStatus.FAILED, ItemStatus.POISONED})

#: The events after which the run loop stops driving: always reported.
ENDS = (RunCompleted, RunFailed, RunPaused, RunCancelled)

#: What a follower is told: (items finished, items in all, what just happened).
Report = Callable[[int, int, str], None]


def finished(state: RunState) -> int:
    """The items finished (done, failed or poisoned), from the state's index."""
    counts = state.counts()
    return sum(counts.get(status.value, 0) for status in FINISHED)


def describe(event: Event) -> str:
    """One line on what ``event`` did, in the words ``pact status`` uses."""
    if isinstance(event, ItemDispatched):
        return f"{event.component_id}/{event.phase.value} #{event.attempt} dispatched"
    if isinstance(event, ItemSucceeded):
        return f"{event.component_id}/{event.phase.value} done"
    if isinstance(event, ItemFailed):
        return f"{event.component_id}/{event.phase.value}: {event.decision}"
    return event.type.replace("_", " ")


class ProgressTally:
    """A run listener that tells ``report`` how far the run has come: at most once
    every ``every_s`` seconds, and always at an event that ends the drive (so the last
    report is the run's end)."""

    def __init__(self, report: Report, *, every_s: float = 0.25) -> None:
        self.report = report
        self.every_s = every_s
        self._reported_at = float("-inf")

    def __call__(self, event: Event, state: RunState) -> None:
        now = time.monotonic()
        if not isinstance(event, ENDS) and now - self._reported_at < self.every_s:
            return
        self._reported_at = now
        self.report(finished(state), len(state.items), describe(event))
