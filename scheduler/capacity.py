"""Global in-flight caps per role across scheduler services, and who carries how much.

A role's cap (``--max-in-flight``, default 16) bounds the attempts in flight on the
whole fleet, whichever services dispatched them. Once per loop each service runs one
script that records its load and decides how many attempts of each role it may
dispatch now, so the decision and the record are one atomic step:

- What is in flight is counted **per run**, in ``pact:runs:in_flight``, by the run's
  owner, recounted from the run's state every loop (never incremented and
  decremented, so nothing drifts). A run's count stays until its next owner
  rewrites it: a service that stops or dies leaves its runs' attempts counted while
  another adopts them, so a handover never opens a gap, nor counts anything twice.
  A run's count is dropped when the run ends, or when no owner has rewritten it for
  :data:`RUN_COUNT_STALE_TTLS` lease TTLs (nobody could adopt it).
- What a service was granted in its last loop and may not have dispatched yet
  (``reserved``) counts too, in its entry of ``pact:schedulers``, together with its
  ready items per role and the runs it drives; an entry whose loop is older than two
  lease TTLs (a dead service) is removed.
- The script grants at most ``cap - (everything in flight and reserved)``. When other
  services have items of the role ready too, the free slots are shared in proportion
  to the ready items (rounded up, at least one), so no service's runs starve
  another's. Within a service, runs share as before (priority p gets p + 1 per round).

All services should be given the same caps; each grants by its own.
"""

from __future__ import annotations

import json
import logging
import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import redis
from redis.exceptions import ResponseError

from pact_workers.fleet import keys
from pact_workers.fleet.wire import discard, is_wrong_type

__all__ = ["RUN_COUNT_STALE_TTLS", "FleetCaps", "Grant", "live_schedulers"]

log = logging.getLogger(__name__)

#: A run's in-flight count nobody has rewritten for this many lease TTLs is dropped.
RUN_COUNT_STALE_TTLS = 6
#: The largest count an entry of either hash may hold (attempts, ready items, runs);
#: an entry with a larger, negative or unreadable one is dropped, as is one dated more
#: than its staleness ahead of Redis's clock (it would never go stale).
MAX_COUNT = 1_000_000

_WHAT = ("each scheduler's last grant", "each run's attempts in flight")


@dataclass(frozen=True)
class Grant:
    """What one loop of one service may do."""

    #: Attempts of each role it may dispatch now.
    slots: dict[str, int]
    #: Runs driven by each other live service (id -> runs).
    others: dict[str, int] = field(default_factory=dict)


class FleetCaps:
    """One service's side of the fleet-wide caps (see the module docstring).

    Args:
        client: a Redis client.
        scheduler_id: this service's id.
        caps: the cap of each role.
        ttl_s: the services' lease TTL (what "stale" is measured in).
    """

    def __init__(
        self, client: redis.Redis, scheduler_id: str, *, caps: Mapping[str, int], ttl_s: float
    ) -> None:
        self.client = client
        self.scheduler_id = scheduler_id
        self.caps = dict(caps)
        self.ttl_s = ttl_s
        self.info = {"host": socket.gethostname(), "pid": os.getpid()}

    def reserve(
        self, in_flight: Mapping[str, Mapping[str, int]], ready: Mapping[str, int]
    ) -> Grant:
        """Record the attempts in flight of each run this service owns (run id -> role
        -> count) and its ready items per role; take the slots it may use now (one
        round trip)."""
        doc = {
            **self.info,
            "ready": {role: n for role, n in ready.items() if n},
            "caps": self.caps,
            "runs": len(in_flight),
        }
        counts = {run: {r: n for r, n in roles.items() if n} for run, roles in in_flight.items()}
        args = [
            self.scheduler_id,
            round(2 * self.ttl_s * 1000),
            round(RUN_COUNT_STALE_TTLS * self.ttl_s * 1000),
            json.dumps(doc),
            json.dumps(counts),
            MAX_COUNT,
        ]
        hashes = [keys.SCHEDULERS, keys.RUNS_IN_FLIGHT]
        try:
            raw = self._reserve_script(keys=hashes, args=args)
        except ResponseError as exc:
            if not is_wrong_type(exc):
                raise
            # Both hashes are rewritten by every loop of every service: nothing in a key
            # of another type by their names can be read, and deleting it loses one loop.
            for key, what in zip(hashes, _WHAT, strict=True):
                discard(self.client, key, expected="hash", what=what)
            raw = self._reserve_script(keys=hashes, args=args)
        reply = json.loads(raw)
        for key, entry in reply.get("dropped") or []:
            log.warning("%s entry %s is not one (a malformed count or time); dropped", key, entry)
        # cjson encodes an empty table as an object: {} here means "nothing".
        slots = {role: int(dict(reply["slots"]).get(role, 0)) for role in self.caps}
        others = {str(k): int(v) for k, v in dict(reply.get("others") or {}).items()}
        return Grant(slots=slots, others=others)

    def forget_run(self, run_id: str) -> None:
        """The run ended: its attempts count no more."""
        self.client.hdel(keys.RUNS_IN_FLIGHT, run_id)

    def leave(self, in_flight: Mapping[str, Mapping[str, int]]) -> None:
        """A clean stop: record the runs' last counts (their next owners take them
        over), then remove this service's entry."""
        self.reserve(in_flight, {})
        self.client.hdel(keys.SCHEDULERS, self.scheduler_id)

    @cached_property
    def _reserve_script(self) -> Any:
        return self.client.register_script(
            """
            if redis.replicate_commands then redis.replicate_commands() end
            local t = redis.call('TIME')
            local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
            local me = cjson.decode(ARGV[4])
            local mine = cjson.decode(ARGV[5])
            local flying, wanting, others = {}, {}, {}
            local max = tonumber(ARGV[6])
            local function add(into, counts)
                for role, n in pairs(counts or {}) do
                    into[role] = (into[role] or 0) + n
                end
            end
            -- Anyone can write these hashes: an entry is counted only if it is one.
            local function counts_ok(counts)
                if counts == nil then return true end
                if type(counts) ~= 'table' then return false end
                for role, n in pairs(counts) do
                    if type(role) ~= 'string' or type(n) ~= 'number' or n ~= n
                            or n < 0 or n > max then
                        return false
                    end
                end
                return true
            end
            local dropped = {}
            -- nil: stale (its writer is gone); false: not an entry (named in the reply).
            local function read(key, id, raw, stale)
                local ok, doc = pcall(cjson.decode, raw)
                if not ok or type(doc) ~= 'table' or type(doc.at) ~= 'number'
                        or doc.at ~= doc.at or doc.at - now > stale then
                    table.insert(dropped, {key, id})
                    redis.call('HDEL', key, id)
                    return false
                end
                if now - doc.at > stale then
                    redis.call('HDEL', key, id)
                    return nil
                end
                return doc
            end
            local all = redis.call('HGETALL', KEYS[1])
            for i = 1, #all, 2 do
                local id = all[i]
                if id ~= ARGV[1] then
                    local doc = read(KEYS[1], id, all[i + 1], tonumber(ARGV[2]))
                    if doc and not (counts_ok(doc.reserved) and counts_ok(doc.ready)
                            and (doc.runs == nil or (type(doc.runs) == 'number'
                                and doc.runs >= 0 and doc.runs <= max))) then
                        table.insert(dropped, {KEYS[1], id})
                        redis.call('HDEL', KEYS[1], id)
                    elseif doc then
                        add(flying, doc.reserved)
                        add(wanting, doc.ready)
                        others[id] = doc.runs or 0
                    end
                end
            end
            local runs = redis.call('HGETALL', KEYS[2])
            for i = 1, #runs, 2 do
                local run = runs[i]
                if mine[run] == nil then
                    local doc = read(KEYS[2], run, runs[i + 1], tonumber(ARGV[3]))
                    if doc and not counts_ok(doc.n) then
                        table.insert(dropped, {KEYS[2], run})
                        redis.call('HDEL', KEYS[2], run)
                    elseif doc then
                        add(flying, doc.n)
                    end
                end
            end
            local own = {}
            for run, counts in pairs(mine) do
                add(own, counts)
                redis.call('HSET', KEYS[2], run, cjson.encode({at = now, by = ARGV[1], n = counts}))
            end
            local slots = {}
            for role, cap in pairs(me.caps) do
                local want = me.ready[role] or 0
                local free = cap - (own[role] or 0) - (flying[role] or 0)
                local grant = 0
                if free > 0 and want > 0 then
                    local theirs = wanting[role] or 0
                    local share = free
                    if theirs > 0 then
                        share = math.max(1, math.ceil(free * want / (want + theirs)))
                    end
                    grant = math.min(want, share, free)
                end
                slots[role] = grant
            end
            me.reserved = slots
            me.at = now
            redis.call('HSET', KEYS[1], ARGV[1], cjson.encode(me))
            return cjson.encode({slots = slots, others = others, dropped = dropped})
            """
        )


def live_schedulers(client: redis.Redis, stale_s: float | None = None) -> dict[str, dict[str, Any]]:
    """Every service's last entry (id -> its JSON), newest loop first; with ``stale_s``,
    only those whose last loop is that recent (by Redis's clock)."""
    seconds, micros = client.time()
    now_ms = seconds * 1000 + micros // 1000
    found: dict[str, dict[str, Any]] = {}
    for raw_id, raw in client.hgetall(keys.SCHEDULERS).items():
        try:
            doc = dict(json.loads(raw))
        except (ValueError, TypeError):
            continue
        at = doc.get("at")
        if stale_s is not None and (
            not isinstance(at, int | float) or now_ms - at > stale_s * 1000
        ):
            continue
        name = raw_id.decode() if isinstance(raw_id, bytes) else str(raw_id)
        found[name] = doc
    return dict(sorted(found.items(), key=lambda kv: -float(kv[1].get("at", 0))))


def runs_in_flight(client: redis.Redis) -> dict[str, dict[str, int]]:
    """Run id -> role -> attempts in flight, as each run's owner last counted them."""
    out: dict[str, dict[str, int]] = {}
    for raw_id, raw in client.hgetall(keys.RUNS_IN_FLIGHT).items():
        try:
            counts = dict(json.loads(raw).get("n") or {})
        except (ValueError, TypeError, AttributeError):
            continue
        name = raw_id.decode() if isinstance(raw_id, bytes) else str(raw_id)
        out[name] = {str(role): int(n) for role, n in counts.items()}
    return out
