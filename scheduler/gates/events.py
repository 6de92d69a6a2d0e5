"""The gates' audit events: what a gate decided about one work item.

A blocking teachback moves an item through ``teachback_pending`` (the dispatch of a
teachback), ``under_review`` (:class:`TeachbackSubmitted`) and ``active`` or
``correcting`` (:class:`TeachbackReviewed`); human review through
``awaiting_review`` (:class:`ReviewRequested`) to done or a new attempt
(:class:`ReviewDecided`). Advisory mode records :class:`GateWouldHaveBlocked`.

These models import nothing of :mod:`scheduler.events` (which imports them into its
union), so their base repeats the two fields every event has.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Literal, Self

from pydantic import BaseModel, ConfigDict, Field

from pact_workers.models.testing import TestResults
from pact_workers.models.work import Phase, ResultMessage, Usage

#: What an attempt is for: the work itself, the teachback that must precede it, or
#: the auditor's review of a verified attempt before its promotion.
Stage = Literal["work", "teachback", "audit"]


#: ``error_type`` of an attempt the harness accepted and the auditor rejected: retried
#: with the findings as feedback, like an attempt whose tests failed.
AUDIT_REJECTED = "audit_rejected"


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


class _GateEvent(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    seq: int = 0
    ts: str = Field(default_factory=_now)
    component_id: str
    phase: Phase
    attempt: int


class GateWouldHaveBlocked(_GateEvent):
    """Advisory mode: blocking mode would have held this work call for a teachback."""

    type: Literal["gate_would_have_blocked"] = "gate_would_have_blocked"
    score: int
    reason: str


class TeachbackSubmitted(_GateEvent):
    """The agent's teachback arrived (``teachback_pending`` -> ``under_review``)."""

    type: Literal["teachback_submitted"] = "teachback_submitted"
    #: Digest of the bundle holding ``teachback.json``.
    output: str
    usage: Usage = Field(default_factory=Usage)


class TeachbackReviewed(_GateEvent):
    """A reviewer's verdict on a teachback (``under_review`` -> ``active`` when approved,
    ``correcting`` when not); the findings go back to the agent as corrections."""

    type: Literal["teachback_reviewed"] = "teachback_reviewed"
    approved: bool
    reviewer: str = "checker"
    findings: list[str] = Field(default_factory=list)
    #: The rejection that exhausted the rounds: the item's failure follows.
    final: bool = False
    #: The checker approved it and the auditor reviews it next (``under_review`` still).
    audit_next: bool = False
    #: What the review cost (an auditor's call; the checker's costs nothing).
    usage: Usage = Field(default_factory=Usage)


class _Held(_GateEvent):
    """A verified attempt held back from promotion: what the harness accepted."""

    score: int = 0
    output: str
    files: list[str] = Field(default_factory=list)
    test_results: TestResults | None = None
    usage: Usage = Field(default_factory=Usage)
    duration_s: float = 0.0
    discovered_dependencies: list[str] = Field(default_factory=list)
    external_dependencies: list[str] = Field(default_factory=list)

    @classmethod
    def holding(
        cls,
        result: ResultMessage,
        score: int,
        *,
        files: list[str],
        discovered: list[str],
        external: list[str],
    ) -> Self:
        """The event holding ``result``, a verified attempt of an item of variety
        ``score``, with what the harness found (its files, the dependencies its code
        imports)."""
        return cls(
            component_id=result.component_id,
            phase=result.phase,
            attempt=result.attempt,
            score=score,
            output=result.output or "",
            files=files,
            test_results=result.test_results,
            usage=result.usage,
            duration_s=result.duration_s,
            discovered_dependencies=discovered,
            external_dependencies=external,
        )


class ReviewRequested(_Held):
    """A verified attempt waits for a human (``awaiting_review``); what the harness
    accepted is kept here, to become the item's success when it is approved."""

    type: Literal["review_requested"] = "review_requested"


class AuditRequested(_Held):
    """A verified attempt of an item whose gates require the auditor: the item goes
    back to pending and its next dispatch is the audit (role ``auditor``)."""

    type: Literal["audit_requested"] = "audit_requested"


class AuditReviewed(_GateEvent):
    """The auditor's verdict on a verified attempt: approved (the item's success
    follows) or rejected (its failure follows, the findings as feedback)."""

    type: Literal["audit_reviewed"] = "audit_reviewed"
    approved: bool
    reviewer: str = "auditor"
    findings: list[str] = Field(default_factory=list)
    usage: Usage = Field(default_factory=Usage)


class ReviewDecided(_GateEvent):
    """A human approved (the item is done and promoted) or rejected (the note goes to
    a new attempt as feedback) an item awaiting review."""

    type: Literal["review_decided"] = "review_decided"
    approved: bool
    by: str
    note: str = ""


GATE_EVENTS = (
    AuditRequested,
    AuditReviewed,
    GateWouldHaveBlocked,
    TeachbackSubmitted,
    TeachbackReviewed,
    ReviewRequested,
    ReviewDecided,
)
