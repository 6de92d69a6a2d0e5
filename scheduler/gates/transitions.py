"""How the gates' events change the run state (a part of :mod:`scheduler.fold`).

Each handler changes an item's status only through the fold's ``_set_status``, so
the state's indexes stay right; a teachback that was reviewed and an attempt that
waits for review count as finished attempts, as the index built from scratch says.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pact_workers.models.work import FailureNote, ItemStatus, Phase
from scheduler.gates.events import (
    AuditRequested,
    AuditReviewed,
    GateWouldHaveBlocked,
    ReviewDecided,
    ReviewRequested,
    Stage,
    TeachbackReviewed,
    TeachbackSubmitted,
)
from scheduler.gates.item import NO_GATES, interned, open_gates

if TYPE_CHECKING:
    from scheduler.gates.dimensions import GateRecord
    from scheduler.state import ItemState, RunState

# The fold imports this module; its helpers are imported where used, to break the cycle.


def gate_dispatched(item: ItemState, gate: GateRecord | None, stage: Stage) -> None:
    """An ``item_dispatched``: its gate record, and whether it asks for a teachback."""
    # The reasons stay in the log's event: the state (and state.json) keeps the numbers,
    # and only for the items whose work call is gated (the event keeps every record).
    kept = gate is not None and item.phase in (Phase.IMPLEMENT, Phase.INTEGRATE)
    record = interned(gate) if gate is not None and kept else None
    if record is None and stage == "work" and item.gates is NO_GATES:
        return  # nothing to record: the item keeps the shared empty gates
    gates = open_gates(item)
    gates.record = record
    gates.stage = stage
    if stage == "teachback":
        gates.state = "teachback_pending"
        gates.teachback_approved = False
    elif gates.state in {"under_review", "correcting", "teachback_pending"}:
        gates.state = "active"


def _would_have_blocked(state: RunState, e: GateWouldHaveBlocked) -> None:
    open_gates(state.item(e.component_id, e.phase)).would_have_blocked = True


def _submitted(state: RunState, e: TeachbackSubmitted) -> None:
    from scheduler.fold import _spend

    item = state.item(e.component_id, e.phase)
    gates = open_gates(item)
    gates.state = "under_review"
    gates.teachback_output = e.output
    _spend(state, item, e.phase, e.usage)


def _reviewed(state: RunState, e: TeachbackReviewed) -> None:
    from scheduler.fold import _set_retry, _set_status, _spend

    item = state.item(e.component_id, e.phase)
    gates = open_gates(item)
    _spend(state, item, e.phase, e.usage)
    gates.audit_teachback = e.approved and e.audit_next
    if gates.audit_teachback:
        gates.state = "under_review"  # the auditor reviews it next
    elif e.approved:
        gates.state = "active"
        gates.teachback_approved = True
        gates.corrections = []
    else:
        gates.state = "correcting"
        gates.teachback_rounds += 1
        gates.corrections = list(e.findings)
        item.failures.append(
            FailureNote(
                attempt=e.attempt,
                summary="teachback rejected: " + "; ".join(e.findings),
            )
        )
    if e.final:
        return  # the item's failure follows and ends the attempt
    _set_status(state, item, ItemStatus.PENDING)
    _set_retry(state, item, None)
    state.index.finished_attempts[e.phase] += 1


def _review_requested(state: RunState, e: ReviewRequested) -> None:
    from scheduler.fold import _set_status, _spend

    item = state.item(e.component_id, e.phase)
    _set_status(state, item, ItemStatus.AWAITING_REVIEW)
    state.index.finished_attempts[e.phase] += 1
    gates = open_gates(item)
    gates.review = e
    gates.state = "awaiting_review"
    item.test_results = e.test_results
    item.last_error = ""
    _spend(state, item, e.phase, e.usage)


def _review_decided(state: RunState, e: ReviewDecided) -> None:
    from scheduler.fold import _set_retry, _set_status

    item = state.item(e.component_id, e.phase)
    gates = open_gates(item)
    held = gates.review
    gates.decided_by, gates.note = e.by, e.note
    gates.review = None
    if held is None:
        return
    if e.approved:
        gates.state = "approved"
        _set_status(state, item, ItemStatus.DONE)
        item.output = held.output
        item.files = list(held.files)
        item.test_results = held.test_results
        item.duration_s = held.duration_s
        if held.duration_s > 0:
            state.index.add_duration(e.phase, held.duration_s)
        if held.discovered_dependencies:
            known = state.dependencies.setdefault(e.component_id, [])
            known.extend(d for d in held.discovered_dependencies if d not in known)
        if held.external_dependencies:
            state.external_dependencies[e.component_id] = list(held.external_dependencies)
        return
    gates.state = "rejected"
    item.rejections += 1
    item.last_error = f"rejected in review by {e.by}: {e.note}"
    item.failures.append(
        FailureNote(attempt=e.attempt, summary=item.last_error, output=held.output)
    )
    _set_status(state, item, ItemStatus.PENDING)
    _set_retry(state, item, None)


def _audit_requested(state: RunState, e: AuditRequested) -> None:
    from scheduler.fold import _set_retry, _set_status, _spend

    item = state.item(e.component_id, e.phase)
    _set_status(state, item, ItemStatus.PENDING)
    _set_retry(state, item, None)
    state.index.finished_attempts[e.phase] += 1
    gates = open_gates(item)
    gates.audit = e
    gates.state = "audit_pending"
    _spend(state, item, e.phase, e.usage)


def _audit_reviewed(state: RunState, e: AuditReviewed) -> None:
    from scheduler.fold import _spend

    item = state.item(e.component_id, e.phase)
    gates = open_gates(item)
    gates.audit = None
    gates.state = "audited"
    gates.audit_findings = list(e.findings)
    _spend(state, item, e.phase, e.usage)
    # The item's success or failure follows at once, from the same attempt.


GATE_TRANSITIONS: dict[type, Callable[[Any, Any], None]] = {
    AuditRequested: _audit_requested,
    AuditReviewed: _audit_reviewed,
    GateWouldHaveBlocked: _would_have_blocked,
    TeachbackSubmitted: _submitted,
    TeachbackReviewed: _reviewed,
    ReviewRequested: _review_requested,
    ReviewDecided: _review_decided,
}
