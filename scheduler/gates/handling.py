"""The gates in the run loop: the part of :class:`~scheduler.run.RunController` that
scores a dispatch, reviews a teachback, and holds a verified item for a human.

Rules:

- a teachback's result is never a success of the item: it is logged as submitted,
  reviewed by the checker (then, when the gates require the auditor, by the auditor:
  :mod:`scheduler.gates.auditing`) and approved (the item goes back to pending, its
  next dispatch is the work call) or rejected (pending again, the corrections in its
  feedback); the ``gates.max_teachback_rounds``-th rejection fails the item with
  the reason and poisons what depends on it;
- a verified attempt of an item under review (``review: gated`` and a score of 7 or
  more, or ``review: all``; implement and integrate only) is logged as
  ``review_requested`` instead of a success: nothing is promoted and nothing
  downstream starts until a human decides;
- a verified attempt of an item whose gates require the auditor is held for it first
  (:mod:`scheduler.gates.auditing`);
- when nothing else can move and items await review, the run pauses saying so
  (``pact review``, then ``pact approve`` or ``pact reject``); a paused item holds
  no lease and no worker, so neither stall timers nor the budget run meanwhile.
"""

from __future__ import annotations

from functools import partial

from pact_workers.errors import PactError
from pact_workers.models.contract import ComponentContract
from pact_workers.models.teachback import parse_teachback
from pact_workers.models.work import ErrorClass, ItemStatus, Phase, ResultMessage, Usage
from scheduler.events import ItemFailed, RunPaused
from scheduler.gates.auditing import AuditHandling, score_of
from scheduler.gates.dimensions import GateRecord
from scheduler.gates.events import (
    AUDIT_REJECTED,
    ReviewRequested,
    Stage,
    TeachbackReviewed,
    TeachbackSubmitted,
)
from scheduler.gates.fleet import decision_events, take_review_requests
from scheduler.gates.keeper import GATED_PHASES
from scheduler.gates.reviewers import Verdict
from scheduler.gates.settings import ReviewMode
from scheduler.gates.teachback import TeachbackChecker, TeachbackSubject
from scheduler.state import RunState, RunStatus

#: ``error_type`` of an item whose teachbacks were rejected too often.
TEACHBACK_REJECTED = "teachback_rejected"


class GateHandling(AuditHandling):
    """See the module docstring."""

    # -- dispatch -----------------------------------------------------------------

    def _gate_dispatch(self, component_id: str, phase: Phase) -> tuple[GateRecord, Stage]:
        """The gate record of this dispatch and its stage (logging what advisory mode
        would have blocked)."""
        assert self.scheduler is not None
        keeper = self.gatekeeper
        record = keeper.record(self.state, self.scheduler.graph.dependents, component_id)
        advisory = keeper.would_have_blocked(self.state, component_id, phase, record)
        if advisory is not None:
            self._log(advisory)
        return record, keeper.stage(self.state, component_id, phase, record)

    def _gate_inputs(
        self, component_id: str, phase: Phase, stage: Stage, inputs: dict[str, str]
    ) -> dict[str, str]:
        """An audit also sees what it reviews: the attempt (``output``) or the
        teachback (``teachback``)."""
        gates = self.state.item(component_id, phase).gates
        if stage != "audit":
            return inputs
        if gates.audit is not None:
            return {**inputs, "output": gates.audit.output}
        if gates.audit_teachback and gates.teachback_output:
            return {**inputs, "teachback": gates.teachback_output}
        return inputs

    # -- teachbacks ---------------------------------------------------------------

    def _gate_result(self, result: ResultMessage) -> bool:
        """Handle the result of a teachback attempt; False for a work attempt."""
        item = self.state.item(result.component_id, result.phase)
        if item.gates.stage == "audit":
            self._audit_result(result)  # of a verified attempt, or of a teachback
            return True
        if item.gates.stage != "teachback":
            return False
        if result.outcome != "ok" or result.output is None:
            self._fail(result)  # the failure policy, as for any attempt
            return True
        self._log(
            TeachbackSubmitted(
                component_id=result.component_id,
                phase=result.phase,
                attempt=result.attempt,
                output=result.output,
                usage=result.usage,
            )
        )
        verdict = self._review_teachback(result)
        record = item.gates.record
        # The checker's approval of an item whose gates require the auditor is not the
        # last word: the auditor reviews the teachback next.
        audit_next = verdict.approved and self.gatekeeper.audits(result.phase, record)
        self._teachback_verdict(result, verdict, audit_next=audit_next)
        return True

    def _teachback_verdict(
        self,
        result: ResultMessage,
        verdict: Verdict,
        *,
        audit_next: bool = False,
        usage: Usage | None = None,
    ) -> None:
        """Log a reviewer's verdict on a teachback; the last rejection fails the item."""
        item = self.state.item(result.component_id, result.phase)
        rounds = item.gates.teachback_rounds + (0 if verdict.approved else 1)
        final = not verdict.approved and rounds >= self.settings.gates.max_teachback_rounds
        self._log(
            TeachbackReviewed(
                component_id=result.component_id,
                phase=result.phase,
                attempt=result.attempt,
                approved=verdict.approved,
                reviewer=verdict.reviewer,
                findings=verdict.findings,
                final=final,
                audit_next=audit_next,
                usage=usage or Usage(),
            )
        )
        if final:
            self._log(
                ItemFailed(
                    component_id=result.component_id,
                    phase=result.phase,
                    attempt=result.attempt,
                    error_class=ErrorClass.PERMANENT,
                    error_type=TEACHBACK_REJECTED,
                    error=(
                        f"teachback rejected {rounds} times (gates.max_teachback_rounds): "
                        + "; ".join(verdict.findings)
                    ),
                    decision="give_up",
                )
            )
            self._poison(result.component_id, result.phase)

    def _review_teachback(self, result: ResultMessage) -> Verdict:
        checker = TeachbackChecker()
        cid = result.component_id
        try:
            teachback = parse_teachback(dict(self.store.get_bundle(result.output or "")), cid)
            contract_item = self.state.item(cid, Phase.CONTRACT)
            contract_files = self.store.get_bundle(contract_item.output or "")
            contract = ComponentContract.model_validate_json(contract_files["interface.json"])
        except (PactError, KeyError, ValueError) as exc:
            return Verdict(reviewer=checker.name, approved=False, findings=[str(exc)])
        assert self.state.tree is not None
        allowed = set(self.state.dependencies.get(cid, []))
        allowed |= set(self.state.tree.nodes[cid].children)
        return checker.review(
            TeachbackSubject(teachback=teachback, contract=contract, allowed=frozenset(allowed))
        )

    # -- human review -------------------------------------------------------------

    def _hold_for_review(self, result: ResultMessage, **found: list[str]) -> bool:
        """Log a verified attempt as awaiting review when ``review:`` asks for it
        (``found``: what the harness found, see :meth:`ReviewRequested.holding`)."""
        record = self.state.item(result.component_id, result.phase).gates.record
        mode = self.settings.review
        if result.phase not in GATED_PHASES or mode is ReviewMode.NONE:
            return False
        if mode is ReviewMode.GATED and (record is None or not record.gates.auditor_required):
            return False
        self._log(ReviewRequested.holding(result, score_of(record), **found))
        return True

    def _take_reviews(self) -> None:
        """Apply the decisions ``pact approve`` / ``reject --broker`` left in Redis for
        this run (only a fleet run has any, and only while items await review)."""
        if not awaiting_review(self.state):
            return
        client = getattr(getattr(self.executor, "fleet", None), "client", None)
        if client is None:
            return
        for event in decision_events(self.state, take_review_requests(client, self.state.run_id)):
            self._log(event)
            if event.approved:
                self._after_commit(partial(self._promote, event.component_id, event.phase))

    def _pause_for_review(self) -> bool:
        """When the run would end with items awaiting review, pause it instead."""
        if self.state.status is not RunStatus.ACTIVE:
            return False
        waiting = awaiting_review(self.state)
        if not waiting:
            return False
        where = self.project.root
        self._log(
            RunPaused(
                reason=f"{len(waiting)} item(s) await review: {', '.join(waiting)}",
                recommendation=(
                    f"pact review {where}; then pact approve {where} ITEM or "
                    f"pact reject {where} ITEM --note '...'"
                ),
                pattern_type="awaiting_review",
            )
        )
        return True


def awaiting_review(state: RunState) -> list[str]:
    """``component/phase`` of every item awaiting a human's review."""
    if not state.index.counts.get(ItemStatus.AWAITING_REVIEW):
        return []
    return [
        f"{i.component_id}/{i.phase.value}"
        for i in state.items.values()
        if i.status is ItemStatus.AWAITING_REVIEW
    ]


__all__ = ["AUDIT_REJECTED", "TEACHBACK_REJECTED", "GateHandling", "awaiting_review"]
