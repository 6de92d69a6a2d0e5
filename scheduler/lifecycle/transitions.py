"""How the lifecycle's own events change the run state (a part of :mod:`scheduler.fold`).

Statuses change only through the fold's ``_set_status`` (imported where used: the
fold imports this module), so the state's indexes stay right.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pact_workers.models.work import ItemStatus
from scheduler.gates.item import open_gates
from scheduler.lifecycle.events import ItemProgress, RunCancelled

if TYPE_CHECKING:
    from scheduler.state import RunState


def run_cancelled(state: RunState, e: RunCancelled) -> None:
    """Cancel the event's items; a whole run is paused as cancelled, for a resume."""
    from scheduler.fold import _set_retry, _set_status
    from scheduler.state import RunStatus

    for cid, phase in e.items:
        item = state.item(cid, phase)
        if item.status is ItemStatus.AWAITING_REVIEW:
            # The held attempt is dropped: a resume gives the item a new one.
            gates = open_gates(item)
            gates.review = None
            gates.state = ""
        _set_status(state, item, ItemStatus.CANCELLED)
        _set_retry(state, item, None)
        item.suspension = None
        item.suspension_reason = ""
    if e.whole_run:
        state.cancelled = True
        state.cancelled_by = e.by
        if state.status is RunStatus.ACTIVE:
            state.status = RunStatus.PAUSED
            state.pause_reason = f"cancelled by {e.by}" + (f": {e.reason}" if e.reason else "")
            state.recommendation = "`pact resume` carries the run on from where it stopped"


def resumed(state: RunState) -> None:
    """A resume lifts a cancel."""
    state.cancelled = False
    state.cancelled_by = ""


def item_progress(state: RunState, e: ItemProgress) -> None:
    """An attempt in flight runs or verifies (only its current attempt: the table's
    lease_current guard has checked it)."""
    from scheduler.fold import _set_status

    _set_status(state, state.item(e.component_id, e.phase), ItemStatus(e.status))
