"""Which failures the systemic detector looks at.

Only each component's latest failure counts, only while the item is not done,
and only failures newer than the last resume: a run resumed after a fix must
not pause again on the evidence that paused it.

Most transient failures are left out: a retry is their cure. Two kinds are not,
because they are one cause seen from many components and retrying only burns the
retries of every item: an agent that timed out, and a worker that cannot reach a
service at all (the model provider, most often: ``ProviderUnreachable``). Rate
limits are never counted: a wide fan-out hits them everywhere at once, and backing
off is the cure.
"""

from __future__ import annotations

from pact_workers.errors import UNREACHABLE_PREFIX, ProviderUnreachable
from pact_workers.models.testing import TestFailure, TestResults
from pact_workers.models.work import ErrorClass, ItemStatus, Phase
from scheduler.state import INTERRUPTED, ItemState, RunState

#: Transient ``error_type``s that say the worker reached no one: the connection was
#: refused or reset, the name did not resolve, the connect timed out. Many components
#: failing with one of them is an outage, not bad luck.
UNREACHABLE_ERROR_TYPES = frozenset(
    {
        ProviderUnreachable.__name__,
        "APIConnectionError",  # an SDK's error, when an agent lets it through unwrapped
        "ConnectError",  # httpx
        "ConnectTimeout",  # httpx
        "ConnectionError",
        "ConnectionRefusedError",
        "ConnectionResetError",
        "ConnectionAbortedError",
    }
)

#: The test id under which a failure without test results is described.
AGENT_TEST_ID = "<agent>"


def recent_failures(state: RunState) -> dict[Phase, dict[str, TestResults]]:
    """Per phase, the latest failing test results of each component still not done.

    An agent that timed out or could not reach its provider ran no tests; its failure
    is described the way the harness would describe one (0 tests, one error whose
    message is the failure), so that the detector sees what it has in common with the
    other components'.
    """
    out: dict[Phase, dict[str, TestResults]] = {}
    for item in _failing(state):
        if item.status is ItemStatus.DONE or not item.last_error:
            continue
        if item.failed_seq <= state.resumed_seq:
            continue
        results = item.test_results
        if results is None and item.last_error_class is ErrorClass.TRANSIENT:
            if not (_timed_out(item) or _unreachable(item)):
                continue
            results = TestResults(
                total=0,
                errors=1,
                failure_details=[TestFailure(test_id=AGENT_TEST_ID, error_message=item.last_error)],
            )
        if results is not None:
            out.setdefault(item.phase, {})[item.component_id] = results
    return out


#: Error types judged by their test results (see systemic.py), not by repetition.
_JUDGED_BY_RESULTS = frozenset({"tests_failed", "rejected", INTERRUPTED, "stalled"})


def repeated_errors(state: RunState, threshold: int) -> tuple[Phase, str, list[str]] | None:
    """The same error type on ``threshold`` components of one phase (seed 1.2): a
    permanent error, or a transient one that says the worker reached no one
    (:data:`UNREACHABLE_ERROR_TYPES`).

    Returns (phase, sample error, components) or None. Only failures newer than
    the last resume count, and only items that are still not done.
    """
    groups: dict[tuple[Phase, str], list[str]] = {}
    sample: dict[tuple[Phase, str], str] = {}
    for item in _failing(state):
        if item.status is ItemStatus.DONE or item.failed_seq <= state.resumed_seq:
            continue
        if item.last_error_class is ErrorClass.TRANSIENT:
            if item.last_error_type not in UNREACHABLE_ERROR_TYPES:
                continue
        elif item.last_error_class is not ErrorClass.PERMANENT:
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


def _timed_out(item: ItemState) -> bool:
    return INTERRUPTED not in item.last_error and "TimeoutError" in item.last_error


def _unreachable(item: ItemState) -> bool:
    return item.last_error_type == ProviderUnreachable.__name__ or item.last_error.startswith(
        UNREACHABLE_PREFIX
    )


def _failing(state: RunState) -> list[ItemState]:
    """Items whose latest failure is newer than the last resume and that are not done:
    read from the state's index, so that this costs O(failures), not O(items)."""
    return [state.items[key] for key in state.index.failing]
