"""Leases of in-flight attempts: each is renewed by its worker's activity and expires
when the worker goes quiet for longer than its role's timeout (seed 000, 4.2).

The book is pure bookkeeping over an injected clock; the run loop decides what
an expired lease means (a transient failure, then a new attempt).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from pact_workers.models.work import ErrorClass, Phase, ResultMessage
from scheduler.activity import ActivityTracker
from scheduler.events import ItemFailed
from scheduler.state import INTERRUPTED

Lease = tuple[str, Phase, int]  # component, phase, attempt


class LeaseBook:
    """One :class:`ActivityTracker` per in-flight attempt."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self.clock = clock
        self._trackers: dict[Lease, ActivityTracker] = {}

    def grant(self, lease: Lease) -> None:
        """Start watching an attempt that was just dispatched (or adopted after a restart)."""
        tracker = ActivityTracker(clock=self.clock)
        tracker.record_activity("dispatch")
        self._trackers[lease] = tracker

    def renew(self, leases: Iterable[Lease]) -> None:
        """Worker activity: each of these attempts is alive."""
        for lease in leases:
            tracker = self._trackers.get(lease)
            if tracker is not None:
                tracker.record_activity("heartbeat")

    def release(self, lease: Lease) -> None:
        self._trackers.pop(lease, None)

    def is_expired(self, lease: Lease, timeout_s: float) -> bool:
        """True when a watched attempt has been quiet for ``timeout_s``."""
        tracker = self._trackers.get(lease)
        return tracker is not None and tracker.is_idle(timeout_s)

    def expired(
        self, leases: Iterable[Lease], timeout_for: Callable[[Phase], float]
    ) -> list[Lease]:
        """The watched ``leases`` quiet for longer than their phase's timeout; released."""
        out = [lease for lease in leases if self.is_expired(lease, timeout_for(lease[1]))]
        for lease in out:
            self.release(lease)
        return out


def lease_failure(run_id: str, lease: Lease, error_type: str, error: str) -> ResultMessage:
    """The transient failure the scheduler records for an attempt whose lease ended."""
    component_id, phase, attempt = lease
    return ResultMessage(
        run_id=run_id,
        component_id=component_id,
        phase=phase,
        attempt=attempt,
        outcome="error",
        error_class=ErrorClass.TRANSIENT,
        error_type=error_type,
        error=error,
    )


def interrupted(lease: Lease, now: float) -> ItemFailed:
    """An in-process attempt that died with the scheduler: retried at once, its retry
    budget untouched (the scheduler stopped, not the attempt)."""
    component_id, phase, attempt = lease
    return ItemFailed(
        component_id=component_id,
        phase=phase,
        attempt=attempt,
        error_class=ErrorClass.TRANSIENT,
        error_type=INTERRUPTED,
        error="the scheduler stopped while this attempt was in flight",
        decision="retry",
        retry_at=now,
    )
