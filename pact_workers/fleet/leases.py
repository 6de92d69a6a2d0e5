"""Leases, fencing tokens and heartbeats: how the scheduler tells a slow worker from a dead one.

The scheduler owns failure detection (DESIGN, "Failure policy"). When it dispatches
attempt *n* of a work item it records *n* as the item's current attempt (the fencing
token) and a ``queued`` lease. The worker that picks the task up checks that *n* is
still current, then holds a ``running`` lease with a short TTL, renewed while the
attempt runs by one background thread per process (:mod:`pact_workers.fleet.keeper`).
A running lease that expires means the worker died: the scheduler dispatches *n + 1*,
and a late result of *n* is dropped because *n* is no longer current. ``mark_done``
makes sure one attempt publishes one result even if Celery redelivers its task.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable
from functools import cached_property
from types import TracebackType
from typing import Any, Protocol

import redis
from redis.exceptions import RedisError

from pact_workers.fleet import keys
from pact_workers.fleet.connection import retry_deadline
from pact_workers.fleet.keeper import STAGE_DELAY_S, LeaseKeeper
from pact_workers.fleet.lease_values import QUEUED, RUNNING, SENT, lease_state
from pact_workers.fleet.wire import read_or_discard

__all__ = ["QUEUED", "RUNNING", "SENT", "Attempt", "LeaseHold", "Leases"]

log = logging.getLogger(__name__)

#: The stage a worker reports when the harness starts verifying, and how its lease says it.
VERIFY_STAGE = "verify"
VERIFY_SUFFIX = b";verify"

AttemptKey = tuple[str, str, str, int]

#: The most digits of a current attempt number (``pact:attempt:``): a longer value, or
#: one that is not all decimal digits, is no attempt number and counts as absent.
MAX_DIGITS = 18
_CURRENT = "the work item's current attempt number"


class Attempt(Protocol):
    """What names one attempt: a TaskMessage or a ResultMessage."""

    @property
    def run_id(self) -> str: ...

    @property
    def component_id(self) -> str: ...

    @property
    def phase(self) -> str: ...

    @property
    def attempt(self) -> int: ...


def _ms(seconds: float) -> int:
    return max(1, round(seconds * 1000))


def _lease_key(task: Attempt) -> str:
    return keys.lease(task.run_id, task.component_id, task.phase, task.attempt)


class Leases:
    """Leases and fencing tokens of attempts, shared by the scheduler and workers.

    Args:
        client: a Redis client.
        ttl_s: the TTL of a running lease; its holder renews it every ``ttl_s / 3``,
            so a dead worker is noticed within ``ttl_s``.
        queued_ttl_s: the TTL of a queued lease (a task waiting in a Celery queue has
            no worker to renew it; the role's timeout is the scheduler's business).
    """

    def __init__(
        self, client: redis.Redis, *, ttl_s: float = 10.0, queued_ttl_s: float = 24 * 3600
    ) -> None:
        if ttl_s <= 0 or queued_ttl_s <= 0:
            raise ValueError("lease TTLs must be positive")
        self.client = client
        self.ttl_s = ttl_s
        self.queued_ttl_s = queued_ttl_s

    def dispatch(self, task: Attempt) -> None:
        """Make ``task.attempt`` the current attempt of its item, with a queued lease."""
        self.dispatch_many([task])

    def dispatch_many(self, tasks: Iterable[Attempt]) -> None:
        """:meth:`dispatch` for several attempts in one round trip."""
        pipe = self.client.pipeline(transaction=True)
        for task in tasks:
            pipe.set(
                keys.current_attempt(task.run_id, task.component_id, task.phase),
                str(task.attempt),
                ex=keys.CURRENT_ATTEMPT_TTL_S,
            )
            pipe.set(_lease_key(task), QUEUED, px=_ms(self.queued_ttl_s))
        pipe.execute()

    def mark_sent(self, tasks: Iterable[Attempt]) -> None:
        """Record that the messages of ``tasks`` are on their queues: each ``queued`` lease
        becomes ``sent`` (TTL kept), in one round trip. A lease a worker already holds,
        or one that is gone, is left alone."""
        lease_keys = [_lease_key(task) for task in tasks]
        if lease_keys:
            self._sent_script(keys=lease_keys, args=[QUEUED, SENT])

    def is_current(self, task: Attempt) -> bool:
        """Whether ``task`` is its item's current attempt, so a worker should run it.

        A missing key counts as current, and so does a recorded attempt older than
        ``task``'s (the scheduler records an attempt before it sends it, so that can only
        be a write Redis lost): a worker never drops work because Redis lost a key.
        """
        key = keys.current_attempt(task.run_id, task.component_id, task.phase)
        raw = read_or_discard(
            self.client, key, lambda: self.client.get(key), expected="string", what=_CURRENT
        )
        if raw is None:
            return True
        if not (isinstance(raw, bytes) and raw.isdigit() and len(raw) <= MAX_DIGITS):
            log.warning("unreadable current attempt %r for %s; running it", raw[:40], key)
            return True
        return task.attempt >= int(raw)

    def hold(self, task: Attempt, worker_id: str) -> LeaseHold:
        """A context manager that holds the running lease of ``task`` while its block runs.

        On entry the lease becomes ``running:<worker_id>`` with a TTL of ``ttl_s``, and
        the process's :attr:`keeper` renews it every ``ttl_s / 3``; on exit the renewals
        stop and the lease is deleted. Redis errors (a restarting server) are logged,
        never raised into the block.
        """
        return LeaseHold(self, task, worker_id)

    def states(self, tasks: Iterable[AttemptKey]) -> dict[AttemptKey, bytes | None]:
        """For each (run_id, component_id, phase, attempt): its lease value (``queued``,
        ``running:<worker>``) or None when there is no lease (one pipeline)."""
        items = list(tasks)
        if not items:
            return {}
        pipe = self.client.pipeline(transaction=False)
        for item in items:
            pipe.get(keys.lease(*item))
        replies = pipe.execute(raise_on_error=False)
        return {
            item: lease_state(self.client, keys.lease(*item), reply)
            for item, reply in zip(items, replies, strict=True)
        }

    def claim(self, task: Attempt, worker_id: str, *, client: Any = None) -> bool:
        """Mark ``task`` running on ``worker_id`` for one TTL, if it is still current.

        A worker calls this the moment it takes the message off the queue, before a
        pool process starts on it: from then on, a worker that dies is noticed within
        one TTL. The pool process then holds and renews the lease (:meth:`start`).
        ``client``: a pipeline to queue the claim on (its reply is then the answer).
        """
        current_key = keys.current_attempt(task.run_id, task.component_id, task.phase)
        value = RUNNING + worker_id.encode()
        return bool(
            self._start_script(
                keys=[current_key, _lease_key(task)],
                args=[task.attempt, value, _ms(self.ttl_s), MAX_DIGITS],
                client=client,
            )
        )

    def alive(self, tasks: Iterable[AttemptKey]) -> dict[AttemptKey, bool]:
        """For each (run_id, component_id, phase, attempt): whether its lease exists."""
        items = list(tasks)
        if not items:
            return {}
        pipe = self.client.pipeline(transaction=False)
        for item in items:
            pipe.exists(keys.lease(*item))
        return {item: bool(found) for item, found in zip(items, pipe.execute(), strict=True)}

    def mark_done(self, task: Attempt) -> bool:
        """Claim the right to publish the result of ``task``: True for the first caller only."""
        key = keys.done(task.run_id, task.component_id, task.phase, task.attempt)
        return bool(self.client.set(key, b"1", nx=True, ex=keys.DONE_TTL_S))

    def start(self, task: Attempt, worker_id: str) -> LeaseHold | None:
        """Check that ``task`` is current and take its running lease, in one round trip.

        Returns the held lease (use it as a context manager), or None when a newer
        attempt was dispatched and this one must not run.
        """
        hold = LeaseHold(self, task, worker_id)
        current_key = keys.current_attempt(task.run_id, task.component_id, task.phase)
        taken = self._start_script(
            keys=[current_key, hold.key],
            args=[task.attempt, hold.value, _ms(self.ttl_s), MAX_DIGITS],
        )
        if not taken:
            return None
        hold.pre_taken = True
        return hold

    def finish(self, task: Attempt, stream: str, result_json: bytes) -> bool:
        """Publish the result of ``task`` once: the done marker, the stream entry and the
        lease's deletion happen together (one script), so a scheduler never sees the
        lease gone without the marker. False when a result was already published.

        Raises:
            redis.ResponseError: ``stream`` is a key of another type; nothing was written.
        """
        done_key = keys.done(task.run_id, task.component_id, task.phase, task.attempt)
        return bool(
            self._finish_script(
                keys=[done_key, stream, _lease_key(task)],
                args=[keys.DONE_TTL_S, result_json, keys.RESULTS_MAXLEN],
            )
        )

    @cached_property
    def _start_script(self) -> Any:
        # A missing or older current attempt counts as current (see is_current).
        return self.client.register_script(
            """
            -- Only decimal digits are an attempt number (as for is_current); anything
            -- else, a key of another type too, counts as absent.
            local current = redis.pcall('GET', KEYS[1])
            if type(current) == 'string' and #current <= tonumber(ARGV[4])
                    and current:find('^%d+$') and tonumber(current) > tonumber(ARGV[1]) then
                return 0
            end
            redis.call('SET', KEYS[2], ARGV[2], 'PX', ARGV[3])
            return 1
            """
        )

    @cached_property
    def _sent_script(self) -> Any:
        return self.client.register_script(
            """
            for _, key in ipairs(KEYS) do
                if redis.call('GET', key) == ARGV[1] then
                    redis.call('SET', key, ARGV[2], 'KEEPTTL')
                end
            end
            return 0
            """
        )

    @cached_property
    def _finish_script(self) -> Any:
        return self.client.register_script(
            """
            -- Checked before anything is written (a script's writes are not undone when
            -- a later command fails): a marker without its result would leave the
            -- attempt neither lost nor finished until its role's timeout.
            local kind = redis.call('TYPE', KEYS[2]).ok
            if kind ~= 'stream' and kind ~= 'none' then
                return redis.error_reply('WRONGTYPE ' .. KEYS[2] .. ' is a ' .. kind)
            end
            -- A key of another type by the marker's name is no marker (no result).
            local marker = redis.call('TYPE', KEYS[1]).ok
            if marker ~= 'string' and marker ~= 'none' then redis.call('DEL', KEYS[1]) end
            if not redis.call('SET', KEYS[1], '1', 'NX', 'EX', ARGV[1]) then
                return 0
            end
            redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[3], '*', 'result', ARGV[2])
            redis.call('DEL', KEYS[3])
            return 1
            """
        )

    @cached_property
    def keeper(self) -> LeaseKeeper:
        """Renews the leases this process holds, from one thread."""
        return LeaseKeeper(self.ttl_s / 3, give_up_s=self.ttl_s)

    def forget(self, task: Attempt) -> None:
        """Delete the lease of ``task`` (the scheduler has its result or gave up on it)."""
        self.client.delete(_lease_key(task))


class LeaseHold:
    """The running lease of one attempt, renewed by its process's keeper (see
    :meth:`Leases.hold`)."""

    def __init__(self, leases: Leases, task: Attempt, worker_id: str) -> None:
        self.leases = leases
        self.task = task
        self.key = _lease_key(task)
        self.value = RUNNING + worker_id.encode()
        self.interval_s = leases.ttl_s / 3
        #: Renewals that failed (Redis unreachable) since entry.
        self.failures = 0
        #: Set when the attempt turns out superseded (pact cancel, or a newer attempt):
        #: what runs under ``cancellable(hold.cancelled)`` is then killed.
        self.cancelled = threading.Event()
        self._crashed = False
        #: Set by :meth:`Leases.start` (the lease is already taken) and by :meth:`release`.
        self.pre_taken = False
        self._released = False

    def release(self) -> None:
        """The lease was deleted together with the result (Leases.finish): skip the delete."""
        self._released = True

    def stage(self, name: str) -> None:
        """The attempt moved on (``agent``, then ``verify``): from ``verify`` on the lease
        reads ``running:<worker id>;verify``, which the scheduler shows as verifying.
        Written by the keeper within :data:`~pact_workers.fleet.keeper.STAGE_DELAY_S`
        (never, if the attempt ends first); a failed write is carried by the next renewal."""
        if name != VERIFY_STAGE or self.value.endswith(VERIFY_SUFFIX):
            return
        self.value += VERIFY_SUFFIX
        self.leases.keeper.soon(self, STAGE_DELAY_S)

    def __enter__(self) -> None:
        try:
            if not self.pre_taken:
                self._set()
        except RedisError as exc:
            # The keeper keeps trying; the task must not fail on a Redis blip.
            self.failures += 1
            log.warning("could not take lease %s: %s; retrying in the background", self.key, exc)
        self.leases.keeper.add(self)

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.leases.keeper.remove(self)
        if self._crashed or self._released:
            return
        try:
            # Bounded: if Redis is down, the lease expires on its own within ttl_s.
            with retry_deadline(self.leases.ttl_s):
                self.leases.client.delete(self.key)
        except RedisError as exc:
            log.warning("could not delete lease %s (it expires by itself): %s", self.key, exc)

    def _crash(self) -> None:
        """Test hook: stop renewing and leave the lease behind, as a killed worker does."""
        self._crashed = True
        self.leases.keeper.remove(self)

    def _set(self, *, only_if_present: bool = False) -> bool:
        ttl_ms = _ms(self.leases.ttl_s)
        return bool(self.leases.client.set(self.key, self.value, px=ttl_ms, xx=only_if_present))

    def renew(self) -> bool:
        """Renew once, the keeper's call: False when the attempt was superseded and
        renewing should stop. Each renewal gets one interval of retries, so that a Redis
        outage delays the next renewal by at most that much."""
        try:
            with retry_deadline(self.interval_s):
                return self._renew()
        except RedisError as exc:
            self.failures += 1
            log.warning("could not renew lease %s: %s; retrying", self.key, exc)
        except Exception:  # a renewal bug is logged and counted; the next one is tried
            self.failures += 1
            log.exception("unexpected error renewing lease %s", self.key)
        return True

    def _renew(self) -> bool:
        """Extend the lease; False when the attempt was superseded and renewing should stop."""
        # A cancel moves the item's current attempt past this one while its lease is
        # still there: asked first, so the attempt's sandbox is stopped within a renewal.
        if not self.leases.is_current(self.task):
            log.warning("attempt %s was superseded; stopping it", self.key)
            self.cancelled.set()
            return False
        # SET XX PX sets the value and the TTL at once, and only if the lease is still there.
        if self._set(only_if_present=True):
            return True
        # The lease is gone: it expired (renewals stalled), the scheduler forgot the
        # attempt, or Redis lost it. Re-take it while the attempt is still current.
        log.warning("lease %s had vanished; taking it again", self.key)
        self._set()
        return True
