"""Result messages through a Redis Stream with a consumer group.

Workers :func:`publish_result`; the scheduler reads with a :class:`ResultStream`
and acknowledges an entry only once it has applied it (written it to the audit
log). Nothing is lost when the scheduler dies: whatever it was delivered but did not
acknowledge stays in the group's pending list, and the next scheduler (same consumer
name) reads it first. Entries pending with a consumer that is gone are claimed after
``claim_idle_ms`` (XAUTOCLAIM). Delivery is at least once: results carry an
idempotency key, and applying one twice changes nothing.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import redis
from pydantic import ValidationError
from redis.exceptions import ResponseError

from pact_workers.fleet import keys
from pact_workers.fleet.wire import ensure_group, is_wrong_type
from pact_workers.models.documents import validation_problems
from pact_workers.models.work import ResultMessage

__all__ = ["RESULT_FIELD", "Delivery", "ResultStream", "ResultStreams", "publish_result"]

log = logging.getLogger(__name__)

T = TypeVar("T")
#: A raw stream entry: (id, fields); fields is empty or None for an entry trimmed from
#: the stream while pending. Typed loosely: redis-py's response types vary by protocol.
_Entry = tuple[Any, Any]

#: The stream entry field that holds the ResultMessage JSON.
RESULT_FIELD = "result"
#: Blocking reads end this long before the client's socket timeout would cut them off.
_SOCKET_MARGIN_MS = 1_000


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def publish_result(client: redis.Redis, stream: str, result: ResultMessage) -> str:
    """Append ``result`` to ``stream`` and return the entry id.

    The stream is capped at about :data:`~pact_workers.fleet.keys.RESULTS_MAXLEN`
    entries; the scheduler acknowledges results within seconds, so only a scheduler
    that stays down through that many results could lose one.
    """
    entry_id = client.xadd(
        stream,
        {RESULT_FIELD: result.model_dump_json().encode()},
        maxlen=keys.RESULTS_MAXLEN,
        approximate=True,
    )
    return _text(entry_id)


@dataclass(frozen=True)
class Delivery:
    """One result read from the stream; acknowledge ``entry_id`` once it is applied."""

    entry_id: str
    result: ResultMessage
    #: The stream it was read from.
    stream: str = ""


class ResultStream:
    """The scheduler's side of a results stream.

    :meth:`read` returns, in this order: after construction (and after :meth:`reset`),
    the entries this consumer was delivered before but never acknowledged (a
    restarted scheduler's backlog); then entries idle longer than ``claim_idle_ms``
    in other consumers' pending lists (a consumer that died), claimed with
    XAUTOCLAIM; then new entries. The claim pass is repeated every
    ``claim_idle_ms`` and skips what this object has delivered and not yet
    acknowledged, so it also recovers entries whose delivery reply was lost on a
    broken connection, without handing the caller duplicates of its own work.

    Entries leave the pending list only through :meth:`ack`, except malformed ones
    (not JSON, not a valid ResultMessage, no ``result`` field): those are
    acknowledged at once, counted in :attr:`malformed` and logged with their id.
    One object serves one reading thread.

    Args:
        client: a Redis client.
        stream: the stream key (:data:`keys.RESULTS_STREAM` or :func:`keys.run_results`).
        group: the consumer group.
        consumer: this reader's name; a restarted scheduler must reuse it.
        claim_idle_ms: how long an entry must sit unacknowledged with another
            consumer before it is claimed.
    """

    def __init__(
        self,
        client: redis.Redis,
        stream: str,
        *,
        group: str = keys.RESULTS_GROUP,
        consumer: str = "scheduler",
        claim_idle_ms: int = 30_000,
    ) -> None:
        self.client = client
        self.stream = stream
        self.group = group
        self.consumer = consumer
        self.claim_idle_ms = claim_idle_ms
        #: Entries acknowledged and dropped because they were not valid results.
        self.malformed = 0
        #: Pending entries found already trimmed from the stream (their data is gone).
        self.trimmed = 0
        self._outstanding: set[str] = set()
        self.reset()

    # ------------------------------------------------------------------ public

    def ensure_group(self) -> None:
        """Create the stream and the group (reading from the start) unless they exist. A
        key of another type by the stream's name (it holds no results) is deleted first."""
        ensure_group(self.client, self.stream, self.group, what="results")

    def reset(self) -> None:
        """Start again with this consumer's own pending entries, then a claim pass."""
        self._phase = "pending"
        self._pending_cursor = "0"
        self._claim_cursor = "0-0"
        self._last_claim_s = time.monotonic()
        self._outstanding.clear()

    def read(self, block_ms: int, count: int = 100) -> list[Delivery]:
        """Return up to ``count`` results, blocking up to ``block_ms`` for new ones.

        ``block_ms <= 0`` does not block. The block is cut short below the client's
        socket timeout so that a quiet stream never looks like a dead connection.
        """
        deliveries = self.backlog(count)
        if deliveries:
            return deliveries
        return self._decode(self._read_group(">", count, block_ms=self._block_ms(block_ms)))

    def backlog(self, count: int = 100) -> list[Delivery]:
        """What :meth:`read` returns before new entries: this consumer's own pending
        entries (after construction or :meth:`reset`), then a claim pass when one is
        due. Empty when there is none: the caller reads new entries (``>``) next."""
        if self.live and self._claim_due():
            self._phase = "claim"
            self._claim_cursor = "0-0"
        while self._phase == "pending":
            entries = self._read_group(self._pending_cursor, count, block_ms=None)
            if not entries:
                self._phase = "claim"
                break
            self._pending_cursor = _text(entries[-1][0])
            deliveries = self._decode(entries)
            if deliveries:
                return deliveries
        while self._phase == "claim":
            deliveries = self._decode(self._claim(count))
            if deliveries:
                return deliveries
        return []

    @property
    def live(self) -> bool:
        """True once the backlog is read: only new entries are left to read."""
        return self._phase == "live"

    def ack(self, entry_ids: Sequence[str]) -> None:
        """Acknowledge applied results: they leave the pending list for good."""
        if not entry_ids:
            return
        self._with_group(lambda: self.client.xack(self.stream, self.group, *entry_ids))
        self._outstanding.difference_update(entry_ids)

    # --------------------------------------------------------------- internals

    def _claim_due(self) -> bool:
        return (time.monotonic() - self._last_claim_s) * 1000 >= self.claim_idle_ms

    def _block_ms(self, block_ms: int) -> int | None:
        if block_ms <= 0:
            return None  # BLOCK 0 would mean "forever"
        timeout_s = self.client.get_connection_kwargs().get("socket_timeout")
        if isinstance(timeout_s, int | float) and timeout_s > 0:
            block_ms = min(block_ms, max(1, int(timeout_s * 1000) - _SOCKET_MARGIN_MS))
        return block_ms

    def _with_group(self, call: Callable[[], T]) -> T:
        """Run ``call``; if Redis lost the group (restarted without persistence), recreate
        it and run ``call`` again."""
        try:
            return call()
        except ResponseError as exc:
            if is_wrong_type(exc):  # not a stream: ensure_group replaces it
                self.ensure_group()
                return call()
            if not str(exc).startswith("NOGROUP"):
                raise
            log.warning(
                "consumer group %r of stream %r was missing (Redis restarted without "
                "persistence?); recreating it from the start of the stream",
                self.group,
                self.stream,
            )
            self.ensure_group()
            return call()

    def _read_group(self, stream_id: str, count: int, block_ms: int | None) -> list[_Entry]:
        response: Any = self._with_group(
            lambda: self.client.xreadgroup(
                self.group, self.consumer, {self.stream: stream_id}, count=count, block=block_ms
            )
        )
        if not response:
            return []
        # RESP2 shape: [[stream, [(id, fields), ...]]]; a dict under RESP3.
        if isinstance(response, dict):
            streams = list(response.values())
            return list(streams[0][0]) if streams and streams[0] else []
        return list(response[0][1])

    def _claim(self, count: int) -> list[_Entry]:
        response: Any = self._with_group(
            lambda: self.client.xautoclaim(
                self.stream,
                self.group,
                self.consumer,
                min_idle_time=self.claim_idle_ms,
                start_id=self._claim_cursor,
                count=count,
            )
        )
        cursor, claimed = response[0], response[1]
        deleted = response[2] if len(response) > 2 else []
        if deleted:
            # XAUTOCLAIM drops entries trimmed from the stream from the pending list.
            self.trimmed += len(deleted)
            log.error(
                "results %s on %r were trimmed from the stream before anyone "
                "acknowledged them; their attempts will time out and be dispatched again",
                ", ".join(_text(d) for d in deleted),
                self.stream,
            )
        self._claim_cursor = _text(cursor)
        if self._claim_cursor == "0-0":
            self._phase = "live"
            self._last_claim_s = time.monotonic()
        # What this object delivered and the caller has not acknowledged yet is the
        # caller's work in progress, not an orphan.
        return [entry for entry in claimed if _text(entry[0]) not in self._outstanding]

    def _decode(self, entries: list[_Entry]) -> list[Delivery]:
        deliveries: list[Delivery] = []
        bad: list[str] = []
        for raw_id, fields in entries:
            entry_id = _text(raw_id)
            # Keys are bytes from a bytes client, str from a decoding one.
            payload = next((v for k, v in (fields or {}).items() if _text(k) == RESULT_FIELD), None)
            try:
                if payload is None:
                    raise ValueError(
                        "the entry has no 'result' field"
                        if fields
                        else "the entry is empty (trimmed from the stream?)"
                    )
                result = ResultMessage.model_validate_json(payload)
            except (ValueError, ValidationError) as exc:
                bad.append(entry_id)
                why = (
                    validation_problems(exc, "result", limit=3)
                    if isinstance(exc, ValidationError)
                    else str(exc)
                )
                log.error(
                    "dropping malformed result entry %s on %r: %s", entry_id, self.stream, why[:500]
                )
                continue
            deliveries.append(Delivery(entry_id=entry_id, result=result, stream=self.stream))
        if bad:
            self.malformed += len(bad)
            self._with_group(lambda: self.client.xack(self.stream, self.group, *bad))
        self._outstanding.update(d.entry_id for d in deliveries)
        return deliveries


class ResultStreams:
    """Several results streams read as one: the streams of the runs a scheduler owns.

    Each stream is a :class:`ResultStream` of the same group and consumer name, so a
    stream attached by a new owner starts with what the last one was delivered and
    never acknowledged, then claims what is idle. Once every attached stream's
    backlog is read, one XREADGROUP over all of them waits for new entries, so that
    owning many runs costs one blocking read per loop, not one per run.
    """

    def __init__(
        self,
        client: redis.Redis,
        *,
        group: str = keys.RESULTS_GROUP,
        consumer: str = "scheduler",
        claim_idle_ms: int = 30_000,
    ) -> None:
        self.client = client
        self.group = group
        self.consumer = consumer
        self.claim_idle_ms = claim_idle_ms
        self._streams: dict[str, ResultStream] = {}

    @property
    def streams(self) -> list[str]:
        return list(self._streams)

    def attach(self, stream: str) -> None:
        """Read ``stream`` too (its group created if need be), backlog first."""
        if stream not in self._streams:
            reader = ResultStream(
                self.client,
                stream,
                group=self.group,
                consumer=self.consumer,
                claim_idle_ms=self.claim_idle_ms,
            )
            reader.ensure_group()
            self._streams[stream] = reader

    def detach(self, stream: str) -> None:
        """Stop reading ``stream``; what was delivered and not acknowledged stays pending
        for the consumer name, i.e. for the next reader of the stream."""
        self._streams.pop(stream, None)

    def read(self, block_ms: int, count: int = 100) -> list[Delivery]:
        """Backlogs first (no wait), else new entries of any stream, waiting up to
        ``block_ms`` for the first; up to ``count`` per stream."""
        out: list[Delivery] = []
        for reader in list(self._streams.values()):
            out += reader.backlog(count)
        if out or not self._streams:
            if not self._streams and block_ms > 0:
                time.sleep(block_ms / 1000)
            return out
        readers = list(self._streams.values())
        block = readers[0]._block_ms(block_ms)
        try:
            response = self._read_new(count, block)
        except ResponseError as exc:
            if not (str(exc).startswith("NOGROUP") or is_wrong_type(exc)):
                raise
            log.warning(
                "a results stream lost its consumer group, or is no stream; recreating them"
            )
            for reader in readers:
                reader.ensure_group()
            response = self._read_new(count, block)
        for name, entries in response:
            found = self._streams.get(_text(name))
            if found is not None:
                out += found._decode(list(entries))
        return out

    def _read_new(self, count: int, block_ms: int | None) -> list[tuple[Any, Any]]:
        response: Any = self.client.xreadgroup(
            self.group,
            self.consumer,
            {name: ">" for name in self._streams},
            count=count,
            block=block_ms,
        )
        if not response:
            return []
        if isinstance(response, dict):  # RESP3
            return [(name, value[0]) for name, value in response.items() if value]
        return [(name, entries) for name, entries in response]

    def ack(self, stream: str, entry_ids: Sequence[str]) -> None:
        """Acknowledge applied results of ``stream`` (attached or not: a run given up
        still acknowledges what its log holds)."""
        if not entry_ids:
            return
        reader = self._streams.get(stream)
        if reader is not None:
            reader.ack(entry_ids)
        else:
            self.client.xack(stream, self.group, *entry_ids)
