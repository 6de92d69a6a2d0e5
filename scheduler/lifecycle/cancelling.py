"""The run loop's side of a cancel: take a request left for the run, log it, fence
and revoke the attempts it cancels (mixed into :class:`scheduler.run.RunController`)."""

from __future__ import annotations

from pact_workers.errors import InputError
from pact_workers.models.work import Phase
from scheduler.lifecycle.cancel import CancelRequest, cancel_event, fenced_attempts
from scheduler.lifecycle.cancel import take_cancel_request as take_file_request
from scheduler.runpart import RunPart


class CancelHandling(RunPart):
    """The part of the run controller that applies ``pact cancel``."""

    def take_cancel(self) -> bool:
        """Apply a cancel left for this run, if any; True when one was applied."""
        request: CancelRequest | None = take_file_request(self.project)
        if request is None:
            fleet_request = getattr(self.executor, "cancel_request", None)
            request = fleet_request() if fleet_request is not None else None
        if request is None:
            return False
        try:
            event = cancel_event(self.state, request)
        except InputError:
            return False  # checked by pact cancel; a run changed since names nothing new
        fenced: list[tuple[str, Phase, int]] = fenced_attempts(self.state, event)
        self._log(event)
        for lease in fenced:
            self.leases.release(lease)
        revoke = getattr(self.executor, "revoke", None)
        if revoke is not None and fenced:
            self._after_commit(lambda: revoke(fenced))
        return True
