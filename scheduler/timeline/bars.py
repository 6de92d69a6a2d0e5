"""The run as attempts on worker lanes, read from the audit log (pure: events in,
picture out).

An attempt starts when it is dispatched and ends when its result (or the verdict that
it was lost) is logged. Its lane is the worker slot that reported it (``host/slot``);
an attempt no worker reported on (its worker was killed, its lease expired, the
scheduler stopped) has no slot to name and goes to the lane ``(no report)``. Outcomes:

- ``succeeded``: its result was accepted;
- ``retried``: it failed and the item was dispatched again (a retry or a pause);
- ``lost``: no result came: the worker was lost, it stalled past its timeout, or the
  scheduler stopped; the item was dispatched again;
- ``failed``: it failed and the item gave up;
- ``dropped``: its result came for an attempt no longer current and was dropped;
- ``running``: nothing was logged for it yet.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from pact_workers.models.work import Phase
from scheduler.events import (
    Event,
    ItemDispatched,
    ItemFailed,
    ItemSucceeded,
    ResultDropped,
    RunStarted,
)
from scheduler.policy import STALLED, WORKER_LOST
from scheduler.state import INTERRUPTED

Outcome = Literal["succeeded", "retried", "lost", "failed", "dropped", "running"]

#: The lane of attempts no worker reported on.
NO_REPORT = "(no report)"

#: ``error_type`` of attempts that ended without a result of their own.
LOST_TYPES = frozenset({WORKER_LOST, STALLED, INTERRUPTED})


class Bar(BaseModel):
    """One attempt, in seconds since the run started."""

    model_config = ConfigDict(frozen=True)

    component_id: str
    phase: Phase
    attempt: int
    lane: str
    start_s: float
    end_s: float
    outcome: Outcome
    critical: bool = False

    @property
    def key(self) -> tuple[str, Phase]:
        return (self.component_id, self.phase)

    @property
    def bar_id(self) -> str:
        """A stable id (the SVG element's): ``bar-<component>-<phase>-<attempt>``."""
        return f"bar-{self.component_id}-{self.phase.value}-{self.attempt}"

    @property
    def duration_s(self) -> float:
        return max(0.0, self.end_s - self.start_s)


class RunPicture(BaseModel):
    """Every attempt of a run, its lanes, its makespan and what bounds it."""

    model_config = ConfigDict(frozen=True)

    run_id: str
    bars: list[Bar] = Field(default_factory=list)
    lanes: list[str] = Field(default_factory=list)
    makespan_s: float = 0.0
    critical_path_s: float = 0.0
    work_s: float = 0.0
    slots: int = 1
    lower_bound_s: float = 0.0

    @property
    def ratio(self) -> float:
        """Makespan over the lower bound (1.0 is as fast as any schedule could be)."""
        return self.makespan_s / self.lower_bound_s if self.lower_bound_s > 0 else 0.0

    def summary(self) -> str:
        """Makespan against the lower bound, in words."""
        return (
            f"makespan {self.makespan_s:.2f}s against a lower bound of "
            f"{self.lower_bound_s:.2f}s (critical path {self.critical_path_s:.2f}s; "
            f"{self.work_s:.2f}s of accepted work over {self.slots} "
            f"slot{'s' if self.slots != 1 else ''}): {self.ratio:.2f}x"
        )


def _seconds(ts: str, origin: datetime) -> float:
    return (datetime.fromisoformat(ts) - origin).total_seconds()


def collect_bars(events: Iterable[Event]) -> tuple[str, list[Bar]]:
    """(run id, one bar per attempt) from a run's events, in dispatch order; in one
    pass, so that the events may come from the log one line at a time."""
    stream = iter(events)
    started = next((e for e in stream if isinstance(e, RunStarted)), None)
    if started is None:
        return "", []
    origin = datetime.fromisoformat(started.ts)
    open_: dict[tuple[str, Phase, int], tuple[float, int]] = {}
    closed: dict[tuple[str, Phase, int], Bar] = {}
    order: list[tuple[str, Phase, int]] = []
    last_s = 0.0
    for event in stream:
        now = _seconds(event.ts, origin)
        last_s = max(last_s, now)
        if isinstance(event, ItemDispatched):
            key = (event.component_id, event.phase, event.attempt)
            open_[key] = (now, len(order))
            order.append(key)
        elif isinstance(event, ItemSucceeded | ItemFailed):
            key = (event.component_id, event.phase, event.attempt)
            began = open_.pop(key, None)
            if began is None:
                continue
            closed[key] = Bar(
                component_id=event.component_id,
                phase=event.phase,
                attempt=event.attempt,
                lane=event.worker or NO_REPORT,
                start_s=began[0],
                end_s=now,
                outcome=_outcome(event),
            )
        elif isinstance(event, ResultDropped):
            # A late result of an attempt already given up on (lost, then re-dispatched):
            # its worker did finish it, so it gets a lane and shows as dropped.
            key = (event.component_id, event.phase, event.attempt)
            if key in closed and closed[key].outcome == "lost":
                lane = event.worker or closed[key].lane
                closed[key] = closed[key].model_copy(update={"outcome": "dropped", "lane": lane})
    bars = list(closed.values())
    bars += [
        Bar(
            component_id=cid,
            phase=phase,
            attempt=attempt,
            lane=NO_REPORT,
            start_s=began,
            end_s=last_s,
            outcome="running",
        )
        for (cid, phase, attempt), (began, _) in open_.items()
    ]
    position = {key: i for i, key in enumerate(order)}
    bars.sort(key=lambda b: position.get((b.component_id, b.phase, b.attempt), 0))
    return started.run_id, bars


def _outcome(event: ItemSucceeded | ItemFailed) -> Outcome:
    if isinstance(event, ItemSucceeded):
        return "succeeded"
    if event.error_type in LOST_TYPES:
        return "lost"
    return "failed" if event.decision == "give_up" else "retried"
