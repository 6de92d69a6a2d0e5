"""The auditor in the run loop (role ``auditor``, queue ``pact.auditor``): the part of
:class:`~scheduler.gates.handling.GateHandling` that holds a verified attempt for the
auditor and applies its verdicts.

Rules (only with ``gates: blocking``, for an implement or integrate item whose score
requires the auditor):

- a teachback the checker approved is reviewed by the auditor too (its next dispatch
  is an audit that sees the teachback); the auditor's verdict is the teachback's:
  approved, the work call goes ahead; rejected, its findings go back as corrections;
- a verified work attempt is logged as ``audit_requested`` instead of a success; its
  next dispatch is an audit that sees the attempt's files and the contract; an
  approval makes the held attempt the item's success (then review, promotion), a
  rejection its failure (``audit_rejected``, retried like failing tests) with the
  findings as the next attempt's feedback;
- the auditor is never asked about an attempt the harness rejected: it can add a
  rejection, never accept one. A verdict that cannot be read is a rejection saying so;
  an audit that fails (a transient error) is retried by the failure policy.
"""

from __future__ import annotations

from pact_workers.errors import PactError
from pact_workers.models.audit import parse_audit
from pact_workers.models.work import ErrorClass, ResultMessage, Usage
from scheduler.gates.dimensions import GateRecord
from scheduler.gates.events import AUDIT_REJECTED, AuditRequested, AuditReviewed
from scheduler.gates.reviewers import Verdict
from scheduler.runpart import RunPart

#: The reviewer name an auditor's verdicts carry.
AUDITOR = "auditor"


class AuditHandling(RunPart):
    """See the module docstring."""

    def _hold_for_audit(self, result: ResultMessage, **found: list[str]) -> bool:
        """Log a verified work attempt as waiting for the auditor when its gates say
        so (``found``: what the harness found, see :meth:`AuditRequested.holding`)."""
        gates = self.state.item(result.component_id, result.phase).gates
        if gates.stage != "work" or not self.gatekeeper.audits(result.phase, gates.record):
            return False
        self._log(AuditRequested.holding(result, score_of(gates.record), **found))
        return True

    def _audit_result(self, result: ResultMessage) -> None:
        """Apply an auditor's answer: about a teachback, or about a held attempt."""
        item = self.state.item(result.component_id, result.phase)
        held = item.gates.audit
        if result.outcome != "ok" or result.output is None:
            self._fail(result)  # the failure policy; the next dispatch audits again
            return
        verdict = self._read_verdict(result)
        if held is None:
            # No attempt is held: the audit was of the teachback the checker approved.
            self._teachback_verdict(result, verdict, usage=result.usage)
            return
        self._log(
            AuditReviewed(
                component_id=result.component_id,
                phase=result.phase,
                attempt=result.attempt,
                approved=verdict.approved,
                findings=verdict.findings,
                usage=result.usage,
            )
        )
        if verdict.approved:
            # The attempt the harness accepted becomes the item's success (its cost
            # was counted when it was held).
            self._succeed(
                result.model_copy(
                    update={
                        "output": held.output,
                        "test_results": held.test_results,
                        "usage": Usage(),
                        "duration_s": held.duration_s,
                    }
                )
            )
            return
        self._fail(
            result.model_copy(
                update={
                    "outcome": "error",
                    "error_class": ErrorClass.PERMANENT,
                    "error_type": AUDIT_REJECTED,
                    "error": "the auditor rejected it: " + "; ".join(verdict.findings),
                    "output": held.output,
                    "test_results": held.test_results,
                    "usage": Usage(),
                }
            )
        )

    def _read_verdict(self, result: ResultMessage) -> Verdict:
        try:
            files = dict(self.store.get_bundle(result.output or ""))
            answer = parse_audit(files, result.component_id)
        except PactError as exc:
            return Verdict(
                reviewer=AUDITOR,
                approved=False,
                findings=[f"the auditor's verdict cannot be read: {exc}"],
            )
        return Verdict(reviewer=AUDITOR, approved=answer.approved, findings=answer.findings)


def score_of(record: GateRecord | None) -> int:
    """The variety score of a gate record (0 before the item's first dispatch)."""
    return record.score if record is not None else 0
