"""Which failures the systemic detector looks at.

Only each component's latest failure counts, only while the item is not done,
and only failures newer than the last resume: a run resumed after a fix must
not pause again on the evidence that paused it.
"""

from __future__ import annotations

from pact_workers.models.testing import TestFailure, TestResults
from pact_workers.models.work import ErrorClass, ItemStatus, Phase
from scheduler.state import INTERRUPTED, RunState


def recent_failures(state: RunState) -> dict[Phase, dict[str, TestResults]]:
    """Per phase, the latest failing test results of each component still not done."""
    out: dict[Phase, dict[str, TestResults]] = {}
    for item in state.items.values():
        if item.status is ItemStatus.DONE or not item.last_error:
            continue
        if item.failed_seq <= state.resumed_seq:
            continue
        results = item.test_results
        if results is None and item.last_error_class is ErrorClass.TRANSIENT:
            if INTERRUPTED in item.last_error or "TimeoutError" not in item.last_error:
                continue
            # An agent that timed out ran no tests; describe it the way the harness would.
            results = TestResults(
                total=0,
                errors=1,
                failure_details=[TestFailure(test_id="<agent>", error_message=item.last_error)],
            )
        if results is not None:
            out.setdefault(item.phase, {})[item.component_id] = results
    return out
