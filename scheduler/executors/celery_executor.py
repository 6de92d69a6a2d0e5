"""One run's view of the fleet: :class:`CeleryExecutor`, the Executor interface over
a :class:`~scheduler.executors.celery.CeleryFleet` that a scheduler process may share
between its runs."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pact_workers.fleet import keys
from pact_workers.fleet.wire import read_or_discard
from pact_workers.models.work import Phase, ResultMessage, TaskMessage
from scheduler.executors.base import LostAttempt
from scheduler.executors.celery import CeleryFleet, task_id_of

if TYPE_CHECKING:
    from scheduler.lifecycle.cancel import CancelRequest


class CeleryExecutor:
    """One run's view of a :class:`CeleryFleet` (the Executor interface)."""

    name = "celery"
    survives_restart = True

    def __init__(
        self, fleet: CeleryFleet, run_id: str, *, capacity: int, owns_fleet: bool = False
    ) -> None:
        self.fleet = fleet
        self.run_id = run_id
        self.capacity = capacity
        self.owns_fleet = owns_fleet
        fleet.attach(run_id)

    @classmethod
    def single_run(
        cls, broker_url: str, run_id: str, *, capacity: int, **fleet_options: Any
    ) -> CeleryExecutor:
        """An executor with a fleet connection of its own and a result stream per run."""
        fleet = CeleryFleet(broker_url, stream=keys.run_results(run_id), **fleet_options)
        return cls(fleet, run_id, capacity=capacity, owns_fleet=True)

    def submit(self, task: TaskMessage) -> None:
        self.fleet.submit(task)

    def poll(self, timeout_s: float) -> list[ResultMessage]:
        return self.fleet.read(timeout_s)

    def activity(self) -> list[tuple[str, Phase, int]]:
        return self.fleet.alive(self.run_id)

    def stages(self) -> list[tuple[tuple[str, Phase, int], str]]:
        return self.fleet.stages(self.run_id)

    def ack(self, result: ResultMessage) -> None:
        self.fleet.ack(result)

    def lost(self) -> list[LostAttempt]:
        return self.fleet.lost(self.run_id)

    def adopt(self, attempts: list[tuple[str, Phase, int]]) -> None:
        self.fleet.adopt([(self.run_id, c, p, a) for c, p, a in attempts])

    def close(self) -> None:
        if self.owns_fleet:
            self.fleet.close()

    def cancel_request(self) -> CancelRequest | None:
        """A ``pact cancel --broker`` request left for this run, taken as it is read
        (looked for at most every ``check_every_s``)."""
        from scheduler.lifecycle.cancel import parse_request

        if not self.fleet.due(self.run_id, "cancel"):
            return None
        client, key = self.fleet.client, keys.cancel_request(self.run_id)
        raw = read_or_discard(
            client, key, lambda: client.getdel(key), expected="string", what="a cancel request"
        )
        return parse_request(raw) if isinstance(raw, bytes) else None

    def revoke(self, attempts: list[tuple[str, Phase, int]]) -> None:
        """Fence and revoke the tasks of cancelled attempts: each item's current attempt
        moves past them, so a worker that takes one later finds it superseded and skips
        it (also one that was offline when the revoke was broadcast); one already
        running finishes, and its result is dropped by the fencing."""
        ids = [task_id_of((self.run_id, c, p, a)) for c, p, a in attempts]
        if not ids:
            return
        self.fleet.withdraw([(self.run_id, c, p, a) for c, p, a in attempts])
        pipe = self.fleet.client.pipeline(transaction=False)
        for c, p, a in attempts:
            key = keys.current_attempt(self.run_id, c, p.value)
            pipe.set(key, str(a + 1), ex=keys.CURRENT_ATTEMPT_TTL_S)
        pipe.execute()
        self.fleet.celery.control.revoke(ids)
