"""The regression check's audit event (imports nothing of :mod:`scheduler.events`,
which puts it into its union, so its base repeats the fields every event has)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from pact_workers.models.work import Phase
from scheduler.regression.baseline import BaselineAbuse
from scheduler.regression.compare import Finding
from scheduler.regression.contract import PatchStatus


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


class RegressionChecked(BaseModel):
    """Before an implementation or integration was promoted, the contract tests of the
    done components whose implementation closure includes it ran again against it.

    ``status``: the patch contract's verdict. ``violated``: not promoted, the attempt
    fails with the intent regressions as feedback. ``expired``: the attempt's own
    verification ran against inputs that changed since; ``reverified`` says whether
    running it again against the current ones passed.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    type: Literal["regression_checked"] = "regression_checked"
    seq: int = 0
    ts: str = Field(default_factory=_now)
    component_id: str
    phase: Phase
    attempt: int
    status: PatchStatus
    reason: str = ""
    #: The done components whose tests ran again.
    dependents: list[str] = Field(default_factory=list)
    intent_regressions: list[Finding] = Field(default_factory=list)
    external_regressions: list[Finding] = Field(default_factory=list)
    gate_worsened: bool = False
    baseline_abuse: list[BaselineAbuse] = Field(default_factory=list)
    #: Expired verifications: the closure digest the attempt was verified against, now.
    verified_against: str = ""
    current_closure: str = ""
    reverified: bool | None = None
