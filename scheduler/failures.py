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


#: Error types judged by their test results (see systemic.py), not by repetition.
_JUDGED_BY_RESULTS = frozenset({"tests_failed", "rejected", INTERRUPTED, "stalled"})


def repeated_errors(state: RunState, threshold: int) -> tuple[Phase, str, list[str]] | None:
    """The same permanent error type on ``threshold`` components of one phase (seed 1.2).

    Returns (phase, sample error, components) or None. Only failures newer than
    the last resume count, and only items that are still not done.
    """
    groups: dict[tuple[Phase, str], list[str]] = {}
    sample: dict[tuple[Phase, str], str] = {}
    for item in state.items.values():
        if item.status is ItemStatus.DONE or item.failed_seq <= state.resumed_seq:
            continue
        if item.last_error_class is not ErrorClass.PERMANENT:
            continue
        error_type = item.last_error_type
        if not error_type or error_type in _JUDGED_BY_RESULTS or item.test_results is not None:
            continue
        key = (item.phase, error_type)
        groups.setdefault(key, []).append(item.component_id)
        sample.setdefault(key, item.last_error)
    for key, components in sorted(groups.items(), key=lambda kv: -len(kv[1])):
        if len(set(components)) >= threshold:
            return key[0], sample[key], sorted(set(components))
    return None
