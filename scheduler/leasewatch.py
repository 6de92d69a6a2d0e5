"""Watching the leases of the attempts in flight (mixed into
:class:`scheduler.run.RunController`).

Rules: worker activity renews an attempt's lease; an attempt whose worker went quiet
past its role's timeout fails as ``stalled``, and one whose worker stopped renewing
its fleet lease fails as ``worker_lost``; the failure policy then retries either like
any transient failure.
"""

from __future__ import annotations

from pact_workers.models.work import ROLE_FOR_PHASE
from scheduler.leases import lease_failure
from scheduler.policy import STALLED, WORKER_LOST
from scheduler.runpart import RunPart


class LeaseWatching(RunPart):
    """The part of the run controller that renews, expires and reclaims leases."""

    def _renew_leases(self) -> None:
        self.leases.renew(self.executor.activity())

    def _expire_leases(self) -> None:
        """An attempt whose worker went quiet past its role's timeout is retried."""
        timeouts = self.settings.timeouts
        in_flight = [(i.component_id, i.phase, i.attempt) for i in self.state.in_flight()]
        for lease in self.leases.expired(
            in_flight, lambda phase: timeouts.get_timeout(ROLE_FOR_PHASE[phase].value)
        ):
            timeout_s = timeouts.get_timeout(ROLE_FOR_PHASE[lease[1]].value)
            error = f"TimeoutError: no activity from the worker for {timeout_s}s"
            self._fail(lease_failure(self.state.run_id, lease, STALLED, error))

    def _reclaim_lost(self) -> None:
        """Attempts whose worker stopped renewing its lease are dispatched again."""
        current = {(i.component_id, i.phase, i.attempt) for i in self.state.in_flight()}
        for lease, why in self.executor.lost():
            if lease in current:
                self.leases.release(lease)
                error = f"WorkerLost: {why}"
                self._fail(lease_failure(self.state.run_id, lease, WORKER_LOST, error))
