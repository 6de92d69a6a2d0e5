"""The patch contract (seed 001): scope check, regression attribution, gate delta,
and the decision table that gives one of five statuses.

=======  ==========  ==========  ========  ============  =======  ===============================
intent   intent      external    gate      intent        scope    status
         regressions regressions worsened  caused gate
=======  ==========  ==========  ========  ============  =======  ===============================
no       any         --          any       any           --       violated when any regression or
                                                                  a worsened gate, else accepted
yes      > 0         any         any       any           any      violated
yes      0           any         yes       yes           clean    violated
yes      0           any         yes       no            clean    accepted_with_external_changes
yes      0           > 0         no        --            clean    accepted_with_external_changes
yes      0           0           no        --            clean    accepted
yes      0           any         any       any           violated violated (scope violation)
=======  ==========  ==========  ========  ============  =======  ===============================

Before the table: a before- or after-run missing is ``unverified`` and a report
whose digest changed since the intent was declared is ``expired``.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum
from fnmatch import fnmatchcase
from typing import Literal

from pydantic import BaseModel, ConfigDict

from pact_workers.models.testing import TestResults
from scheduler.regression.compare import Finding, compare_runs


class PatchStatus(StrEnum):
    ACCEPTED = "accepted"
    ACCEPTED_WITH_EXTERNAL_CHANGES = "accepted_with_external_changes"
    VIOLATED = "violated"
    UNVERIFIED = "unverified"
    EXPIRED = "expired"


class Intent(BaseModel):
    """What a change declares it may touch (literal paths or ``fnmatch`` patterns)."""

    model_config = ConfigDict(frozen=True)

    allowed_files: tuple[str, ...] = ()
    allowed_related: tuple[str, ...] = ()

    @property
    def patterns(self) -> tuple[str, ...]:
        return (*self.allowed_files, *self.allowed_related)

    def covers(self, path: str) -> bool:
        """Verify attribution: ``fnmatchcase`` on every declared pattern."""
        return any(fnmatchcase(path, pattern) for pattern in self.patterns)

    def contains(self, path: str) -> bool:
        """Scope check: exact membership (declare literal paths)."""
        return path in self.allowed_files or path in self.allowed_related


class Gate(BaseModel):
    """Whether a run's gate (here: the contract test suite) would fail."""

    model_config = ConfigDict(frozen=True)

    would_fail: bool

    @classmethod
    def of(cls, results: TestResults) -> Gate:
        return cls(would_fail=not results.all_passed)


class PatchVerdict(BaseModel):
    """The patch contract's answer, with everything it was attributed from."""

    model_config = ConfigDict(frozen=True)

    status: PatchStatus
    reason: str = ""
    intent_regressions: tuple[Finding, ...] = ()
    external_regressions: tuple[Finding, ...] = ()
    intent_worsened: tuple[str, ...] = ()
    external_worsened: tuple[str, ...] = ()
    gate_worsened: bool = False
    before_gate: Gate | None = None
    unexpected_files: tuple[str, ...] = ()

    @property
    def accepted(self) -> bool:
        return self.status in {PatchStatus.ACCEPTED, PatchStatus.ACCEPTED_WITH_EXTERNAL_CHANGES}


def gate_worsened(before_gate: Gate, after_gate: Gate) -> bool:
    """True only when the gate passed before and fails after (seed 001: gate delta)."""
    return not before_gate.would_fail and after_gate.would_fail


def partition(
    findings: Sequence[Finding], intent: Intent | None
) -> tuple[list[Finding], list[Finding]]:
    """(intent, external) regressions. Path-less findings are intent; without an
    intent, every finding is."""
    if intent is None:
        return list(findings), []
    inside: list[Finding] = []
    outside: list[Finding] = []
    for finding in findings:
        if not finding.paths or any(intent.covers(p) for p in finding.paths):
            inside.append(finding)
        else:
            outside.append(finding)
    return inside, outside


def check_patch_contract(
    mode: Literal["check", "verify"],
    *,
    intent: Intent | None,
    before: TestResults | None = None,
    after: TestResults | None = None,
    changed_files: Sequence[str] = (),
    worsened_metrics: Sequence[str] = (),
    before_gate: Gate | None = None,
    after_gate: Gate | None = None,
    declared_digest: str = "",
    current_digest: str = "",
) -> PatchVerdict:
    """Judge one change. ``check``: the scope check alone; ``verify``: the scope check,
    then regressions and the gate attributed to the intent (the decision table above).

    ``declared_digest`` / ``current_digest``: the digest of what the change was checked
    against when the intent was declared, and now; when they differ the verdict is
    ``expired`` (check again against the current inputs).
    """
    if declared_digest and current_digest and declared_digest != current_digest:
        return PatchVerdict(
            status=PatchStatus.EXPIRED,
            reason=f"inputs changed since the check ({declared_digest} -> {current_digest})",
        )
    unexpected = tuple(f for f in changed_files if intent is not None and not intent.contains(f))
    if unexpected:
        return PatchVerdict(
            status=PatchStatus.VIOLATED,
            reason=f"scope violation: {', '.join(unexpected)} outside the intent",
            unexpected_files=unexpected,
        )
    if mode == "check":
        return PatchVerdict(status=PatchStatus.ACCEPTED)
    if before is None or after is None:
        missing = "before" if before is None else "after"
        return PatchVerdict(status=PatchStatus.UNVERIFIED, reason=f"no {missing}-run")
    regressions = compare_runs(before, after)
    inside, outside = partition(regressions, intent)
    metrics_in = [m for m in worsened_metrics if intent is None or intent.covers(m)]
    metrics_out = [m for m in worsened_metrics if m not in metrics_in]
    before_gate = before_gate or Gate.of(before)
    worse = gate_worsened(before_gate, after_gate or Gate.of(after))
    attributed = dict(
        intent_regressions=tuple(inside),
        external_regressions=tuple(outside),
        intent_worsened=tuple(metrics_in),
        external_worsened=tuple(metrics_out),
        gate_worsened=worse,
        before_gate=before_gate,
    )
    if inside:
        reason = f"{len(inside)} intent-scope regression(s): " + ", ".join(
            f.test_id for f in inside
        )
        return PatchVerdict(status=PatchStatus.VIOLATED, reason=reason, **attributed)
    if worse and (intent is None or metrics_in):
        return PatchVerdict(
            status=PatchStatus.VIOLATED, reason="the gate fails because of the change", **attributed
        )
    if worse or outside or metrics_out:
        return PatchVerdict(
            status=PatchStatus.ACCEPTED_WITH_EXTERNAL_CHANGES,
            reason=f"{len(outside)} external regression(s)" + (", gate worsened" if worse else ""),
            **attributed,
        )
    return PatchVerdict(status=PatchStatus.ACCEPTED, **attributed)
