"""The lifecycle's own audit event: a human cancelled a run or some of its items.

It imports nothing of :mod:`scheduler.events` (which puts it into its union), so its
base repeats the fields every event has.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from pact_workers.models.work import Phase


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


class RunCancelled(BaseModel):
    """``pact cancel``: the named items (every unfinished one for a whole run) are
    cancelled. Their current attempts are fenced: a result that comes back later is
    dropped. A whole run is paused as cancelled; ``pact resume`` carries it on."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    type: Literal["run_cancelled"] = "run_cancelled"
    seq: int = 0
    ts: str = Field(default_factory=_now)
    #: Who cancelled (a person's name or login) and why.
    by: str
    reason: str = ""
    whole_run: bool = True
    items: list[tuple[str, Phase]] = Field(default_factory=list)


class ItemProgress(BaseModel):
    """A worker reported, through its attempt's lease, that the attempt runs (the agent
    works) or verifies (the harness runs the contract tests)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    type: Literal["item_progress"] = "item_progress"
    seq: int = 0
    ts: str = Field(default_factory=_now)
    component_id: str
    phase: Phase
    attempt: int
    status: Literal["running", "verifying"]
