"""A worker's side of packs: several attempts of one role in one task message.

The scheduler packs short attempts when more are in flight than the fleet has slots
(see :mod:`scheduler.executors.packing`). The worker claims every member's lease
when it takes the message, as it claims a lone attempt's, and one pool process runs
the members one after the other, each exactly as a lone attempt runs (its fencing
check, its held lease, its result). While a member waits for its turn, its claimed
lease is renewed by :class:`WaitingLeases`, so a live worker's waiting attempts never
look lost, and a dead worker's are noticed within a lease TTL, as a running one's.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable
from types import TracebackType

from redis.exceptions import RedisError

from pact_workers.fleet import keys
from pact_workers.fleet.connection import retry_deadline
from pact_workers.fleet.leases import RUNNING, Attempt, Leases

log = logging.getLogger(__name__)


def claim_all(leases: Leases, tasks: Iterable[Attempt], worker_id: str) -> list[bool]:
    """:meth:`Leases.claim` for each of ``tasks``, in one round trip."""
    items = list(tasks)
    if not items:
        return []
    pipe = leases.client.pipeline(transaction=False)
    for task in items:
        leases.claim(task, worker_id, client=pipe)
    return [bool(taken) for taken in pipe.execute()]


class WaitingLeases:
    """Keeps the claimed leases of a pack's waiting members alive, through the process's
    lease keeper (:mod:`pact_workers.fleet.keeper`).

    Every ``ttl_s / 3`` each lease still waiting is set again (``SET XX``: only a
    lease that is still there, so one the scheduler gave up on stays gone). A member
    stops being renewed here when its turn comes (:meth:`started`): from then on its
    own :class:`~pact_workers.fleet.leases.LeaseHold` renews it.
    """

    def __init__(self, leases: Leases, tasks: Iterable[Attempt], worker_id: str) -> None:
        self.leases = leases
        self.value = RUNNING + worker_id.encode()
        self.interval_s = leases.ttl_s / 3
        self._waiting = {_key(task) for task in tasks}
        self._lock = threading.Lock()

    def started(self, task: Attempt) -> None:
        """``task``'s turn came: its own hold renews its lease from now on."""
        with self._lock:
            self._waiting.discard(_key(task))

    def __enter__(self) -> WaitingLeases:
        if self._waiting:
            self.leases.keeper.add(self)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.leases.keeper.remove(self)

    def renew(self) -> bool:
        """Set each waiting lease again, with a fresh TTL, in one round trip (the
        keeper's call; a Redis error is logged and the next renewal tries again)."""
        with self._lock:
            waiting = sorted(self._waiting)
        if not waiting:
            return True
        ttl_ms = max(1, round(self.leases.ttl_s * 1000))
        try:
            with retry_deadline(self.interval_s):
                pipe = self.leases.client.pipeline(transaction=False)
                for key in waiting:
                    pipe.set(key, self.value, px=ttl_ms, xx=True)
                pipe.execute()
        except RedisError as exc:
            log.warning("could not renew the leases of a pack's waiting attempts: %s", exc)
        return True


def _key(task: Attempt) -> str:
    return keys.lease(task.run_id, task.component_id, task.phase, task.attempt)
