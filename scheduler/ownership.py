"""Run ownership: which scheduler service drives which run, by a lease with a fencing token.

The rules, in words:

- A run is driven by at most one scheduler: the holder of its lease
  ``pact:owner:<run>``, whose value is ``<token> <scheduler id>`` and whose TTL is
  the lease TTL.
- The token comes from ``HINCRBY pact:runs:fence <run> 1`` in the script that sets
  the lease: every acquisition gets a larger token than any before it, so no two
  holders of a run, ever, share a token.
- A lease is set only when absent (or held by the same scheduler, which gave the run
  up and takes it again, with a new token). It is extended only by its holder:
  compare the whole value, then extend, in one script. The holder extends all of its
  leases once per loop; a lease left alone for one TTL expires, and any scheduler may
  then take the run (adoption).
- Before every fsynced append to a run's audit log, the writer runs the same
  compare-and-extend for that run (:meth:`RunLeases.fence`); when the value is no
  longer its own, or Redis cannot say, :class:`LeaseLost` is raised and nothing is
  written. So a scheduler that was paused past its lease (SIGSTOP, a VM frozen, a
  long stall) cannot add one line to a log after it resumes: by then the lease is
  gone or another's. On one machine the run's flock (``scheduler.audit``) also
  keeps a second process out; the fence is what holds across machines.
- The holder deletes its lease on a clean stop and when the run ends (compare, then
  delete), so another scheduler can take the run at once.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import redis
from redis.exceptions import RedisError, ResponseError

from pact_workers.errors import PactError
from pact_workers.fleet import keys
from pact_workers.fleet.connection import retry_deadline
from pact_workers.fleet.wire import is_wrong_type, key_type

__all__ = ["Holder", "LeaseLost", "RunLeases", "lease_holders"]

log = logging.getLogger(__name__)


class LeaseLost(PactError):
    """This scheduler no longer owns the run: it must stop writing it and let it go."""


@dataclass(frozen=True)
class Holder:
    """Who holds a run's lease, with which fencing token."""

    token: int
    scheduler_id: str


def _value(token: int, scheduler_id: str) -> bytes:
    return f"{token} {scheduler_id}".encode()


def parse_holder(raw: bytes | str | None) -> Holder | None:
    """The holder a lease value names (None: no lease, or an unreadable value)."""
    if raw is None:
        return None
    text = raw.decode() if isinstance(raw, bytes) else raw
    token, _, scheduler_id = text.partition(" ")
    if not token.isdigit() or not scheduler_id:
        return None
    return Holder(int(token), scheduler_id)


def lease_holders(client: redis.Redis, run_ids: Iterable[str]) -> dict[str, Holder | None]:
    """The current holder of each run's lease (None: nobody holds it), in one round trip."""
    ids = list(run_ids)
    if not ids:
        return {}
    values = client.mget([keys.owner(run_id) for run_id in ids])
    return {run_id: parse_holder(raw) for run_id, raw in zip(ids, values, strict=True)}


class RunLeases:
    """The run leases of one scheduler (see the module docstring).

    Args:
        client: a Redis client.
        scheduler_id: this scheduler's id (no spaces).
        ttl_s: the lease TTL; a dead scheduler's runs are free this long after its
            last renewal.
    """

    def __init__(self, client: redis.Redis, scheduler_id: str, ttl_s: float) -> None:
        if " " in scheduler_id or not scheduler_id:
            raise ValueError(f"a scheduler id must be a non-empty word, got {scheduler_id!r}")
        if ttl_s <= 0:
            raise ValueError("the lease TTL must be positive")
        self.client = client
        self.scheduler_id = scheduler_id
        self.ttl_s = ttl_s
        self._fence_said_at = -60.0

    @property
    def _ttl_ms(self) -> int:
        return max(1, round(self.ttl_s * 1000))

    def acquire(self, run_id: str) -> int | None:
        """Take the lease of ``run_id`` if nobody else holds it; its new token, else None
        (also when no token can be issued: see :meth:`_no_fence`)."""
        try:
            token = self._acquire_script(
                keys=[keys.owner(run_id), keys.RUN_FENCES],
                args=[run_id, self.scheduler_id, self._ttl_ms],
            )
        except ResponseError as exc:
            if not is_wrong_type(exc):
                raise
            self._no_fence()
            return None
        return int(token) or None

    def _no_fence(self) -> None:
        """``pact:runs:fence`` is not a hash. Deleting it, as a reader does with other
        keys of the wrong type (``pact_workers.fleet.wire``), would issue tokens from 1
        again, below those of attempts in flight, which fencing must never do: so it is
        left to an operator, and no run is taken until then (said once a minute)."""
        now = time.monotonic()
        if now < self._fence_said_at + 60.0:
            return
        self._fence_said_at = now
        log.error(
            "%s is a Redis %s, not a hash: no lease token can be issued, so no run can be "
            "taken or adopted (the runs held are driven on). Restore it from a backup; or, "
            "with every scheduler and worker stopped, delete it",
            keys.RUN_FENCES,
            key_type(self.client, keys.RUN_FENCES),
        )

    def renew(self, held: Mapping[str, int]) -> set[str]:
        """Extend the leases of ``held`` (run id -> token) in one round trip; the runs
        whose lease is no longer this scheduler's are returned."""
        ids = list(held)
        if not ids:
            return set()
        lost = self._extend_script(
            keys=[keys.owner(run_id) for run_id in ids],
            args=[self._ttl_ms, *(_value(held[run_id], self.scheduler_id) for run_id in ids)],
        )
        return {ids[int(i) - 1] for i in lost}

    def check(self, run_id: str, token: int) -> None:
        """Extend the lease of ``run_id`` if it is still ours under ``token``; else raise.

        Raises:
            LeaseLost: another scheduler holds the run, the lease expired, or Redis did
                not answer within half a TTL (ownership cannot be confirmed).
        """
        try:
            with retry_deadline(self.ttl_s / 2):
                lost = self.renew({run_id: token})
        except RedisError as exc:
            raise LeaseLost(
                f"run {run_id}: cannot confirm this scheduler still owns it ({exc})"
            ) from exc
        if lost:
            # MGET: a key of another type (no lease) reads as none, where GET fails.
            holder = lease_holders(self.client, [run_id])[run_id]
            who = (
                f"scheduler {holder.scheduler_id} holds it (token {holder.token})"
                if holder
                else "its lease expired"
            )
            raise LeaseLost(f"run {run_id}: this scheduler's lease (token {token}) is gone: {who}")

    def fence(self, run_id: str, token: int) -> Callable[[], None]:
        """What the run's audit log calls before every write: :meth:`check`."""
        return lambda: self.check(run_id, token)

    def release(self, run_id: str, token: int) -> None:
        """Delete the lease of ``run_id`` if it is still ours (a clean stop, the run ended)."""
        self._release_script(keys=[keys.owner(run_id)], args=[_value(token, self.scheduler_id)])

    def orphans(self) -> list[str]:
        """Active runs whose lease nobody holds (their owner stopped or died)."""
        members = [
            (r.decode(errors="replace") if isinstance(r, bytes) else str(r), r)
            for r in self.client.smembers(keys.ACTIVE_RUNS)
        ]
        bad = [raw for run_id, raw in members if not re.fullmatch(keys.RUN_ID_PATTERN, run_id)]
        if bad:
            # Never a directory to open (``..``, ``a/b``): dropped for good.
            log.error("%s: %r are no run ids; removed", keys.ACTIVE_RUNS, bad[:10])
            self.client.srem(keys.ACTIVE_RUNS, *bad)
        active = sorted(r for r, _ in members if re.fullmatch(keys.RUN_ID_PATTERN, r))
        holders = lease_holders(self.client, active)
        return [run_id for run_id in active if holders[run_id] is None]

    # -- scripts ------------------------------------------------------------------

    @cached_property
    def _acquire_script(self) -> Any:
        return self.client.register_script(
            """
            -- A key of another type is no lease: whoever wrote it, it is replaced.
            local kind = redis.call('TYPE', KEYS[1]).ok
            if kind ~= 'string' and kind ~= 'none' then
                redis.call('DEL', KEYS[1])
            end
            local current = redis.call('GET', KEYS[1])
            if current then
                local holder = string.match(current, '^%d+ (.+)$')
                if holder ~= ARGV[2] then
                    return 0
                end
            end
            local token = redis.call('HINCRBY', KEYS[2], ARGV[1], 1)
            redis.call('SET', KEYS[1], token .. ' ' .. ARGV[2], 'PX', ARGV[3])
            return token
            """
        )

    @cached_property
    def _extend_script(self) -> Any:
        return self.client.register_script(
            """
            local lost = {}
            for i, key in ipairs(KEYS) do
                if redis.call('TYPE', key).ok == 'string'
                        and redis.call('GET', key) == ARGV[i + 1] then
                    redis.call('PEXPIRE', key, ARGV[1])
                else
                    lost[#lost + 1] = i
                end
            end
            return lost
            """
        )

    @cached_property
    def _release_script(self) -> Any:
        return self.client.register_script(
            """
            if redis.call('TYPE', KEYS[1]).ok == 'string'
                    and redis.call('GET', KEYS[1]) == ARGV[1] then
                return redis.call('DEL', KEYS[1])
            end
            return 0
            """
        )
