"""The reviewers' one shape: something that looks at a subject and returns a verdict.

The teachback checker (:mod:`scheduler.gates.teachback`) and a human's decision
(:mod:`scheduler.gates.review`) are reviewers; a verdict can approve or reject, and a
rejection always says why (its findings go back to the agent).
"""

from __future__ import annotations

from typing import Protocol, TypeVar

from pydantic import BaseModel, ConfigDict, Field

Subject = TypeVar("Subject", contravariant=True)


class Verdict(BaseModel):
    """A reviewer's decision: approved, or rejected with findings."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    reviewer: str
    approved: bool
    findings: list[str] = Field(default_factory=list)


class Reviewer(Protocol[Subject]):
    """Reviews one kind of subject (a teachback, an attempt's output)."""

    name: str

    def review(self, subject: Subject) -> Verdict:
        """The verdict on ``subject``; never raises for a bad subject (that is a
        rejection with a finding)."""
        ...
