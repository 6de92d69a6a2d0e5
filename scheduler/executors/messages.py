"""Where a sent task message is on the broker: waiting on its role queue, taken by a
worker (the ``unacked`` hash of kombu's Redis transport), or nowhere.

Nowhere happens: a worker pops a message from its queue, and Redis goes away before
the worker records it as taken; the worker then fails to put it back ("Restoring
unacknowledged messages" needs the Redis that is gone) and the message is lost, while
the attempt's lease still says ``sent``, which waits for a worker for a day. The
scheduler finds such attempts by looking for their messages (see
:meth:`scheduler.executors.celery.CeleryFleet.lost`).

Reading a queue costs one ``LLEN`` and, for a queue no longer than
:data:`QUEUE_SCAN_LIMIT`, one ``LRANGE``; a longer queue is not read (a message lost
from it is found once the queue has drained that far).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable

import redis
from redis.exceptions import ResponseError

from pact_workers.fleet.wire import is_wrong_type, key_type
from scheduler.executors.base import LEASE_EXPIRED
from scheduler.executors.packing import PACK_HEADER

log = logging.getLogger(__name__)

#: How long a message may be taken by a worker without its lease claimed, or be nowhere
#: on the broker, before its attempt counts as lost. A live worker claims within
#: milliseconds of taking a message (and its pool process again when it starts it), so
#: this only has to outlast the scheduler's own reads racing a worker's take. A worker
#: killed between taking and claiming is noticed this long after, so it is kept within
#: a few lease TTLs.
CLAIM_GRACE_S = 10.0

#: The longest queue whose messages are read to look for an attempt's.
QUEUE_SCAN_LIMIT = 500


def _task_ids(message: object) -> list[str]:
    """The task id of ``message``, and those of its members when it is a pack
    (:mod:`scheduler.executors.packing`)."""
    try:
        headers = message["headers"]  # type: ignore[index]
        ids = [str(headers["id"])]
    except (LookupError, TypeError):
        return []
    members = headers.get(PACK_HEADER) if isinstance(headers, dict) else None
    if isinstance(members, list):
        ids.extend(str(member) for member in members)
    return ids


def _decoded(raw: bytes | str) -> object:
    """The JSON in ``raw``; None when it is none (or nested past the parser's depth)."""
    try:
        return json.loads(raw)
    except (ValueError, RecursionError):
        return None


def _not_read(client: redis.Redis, key: str, expected: str, what: str) -> None:
    """Say, once per process, that Celery's ``key`` is not of the ``expected`` type and
    is not read (it is Celery's: left as it is)."""
    kind = key_type(client, key)
    if (key, kind) not in _SAID:
        _SAID.add((key, kind))
        log.warning(
            "%s is a Redis %s, not a %s (%s); not read, so no lost message is found there: "
            "delete it if no Celery worker uses it",
            key,
            kind,
            expected,
            what,
        )


_SAID: set[tuple[str, str]] = set()


def taken_task_ids(client: redis.Redis) -> set[str]:
    """Task ids of the messages workers have taken and not acknowledged."""
    try:
        raws = client.hvals("unacked")
    except ResponseError as exc:
        if not is_wrong_type(exc):
            raise
        _not_read(client, "unacked", "hash", "the messages workers have taken")
        return set()
    ids = set()
    for raw in raws:
        message = _decoded(raw)
        if isinstance(message, list) and message:
            ids.update(_task_ids(message[0]))
    return ids


def queued_task_ids(
    client: redis.Redis, queues: Iterable[str], *, limit: int | None = None
) -> dict[str, set[str] | None]:
    """Per queue, the task ids of the messages waiting on it; ``None`` for a queue
    longer than ``limit`` (:data:`QUEUE_SCAN_LIMIT`), not read: a message may be
    waiting there. Each queue's length and contents are read together (MULTI), so a
    queue that grows meanwhile cannot push its oldest messages out of what is read."""
    limit = QUEUE_SCAN_LIMIT if limit is None else limit
    names = sorted(set(queues))
    pipe = client.pipeline(transaction=True)
    for name in names:
        pipe.llen(name)
        pipe.lrange(name, 0, limit - 1)
    replies = pipe.execute(raise_on_error=False) if names else []
    found: dict[str, set[str] | None] = {}
    for i, name in enumerate(names):
        length, raws = replies[2 * i], replies[2 * i + 1]
        for reply in (length, raws):
            if isinstance(reply, ResponseError) and not is_wrong_type(reply):
                raise reply
        if isinstance(length, ResponseError):
            # Not read: as a long queue, one where the message may be (never lost).
            _not_read(client, name, "list", "a role's task queue")
            found[name] = None
            continue
        if length > limit:
            found[name] = None
            continue
        ids = found[name] = set()
        for raw in raws:
            ids.update(_task_ids(_decoded(raw)))
    return found


def why_lost(
    *, expired: bool, unsent: bool, unclaimed: bool, vanished: bool, grace_s: float
) -> str | None:
    """What the audit log says of a lost attempt; None when it is not lost."""
    if expired:
        return LEASE_EXPIRED
    if unsent:
        return "its message was never sent (the scheduler that dispatched it stopped first)"
    if unclaimed:
        return f"a worker took its message and did not claim it within {grace_s:g}s (it died)"
    if vanished:
        return f"its message was nowhere on the broker (not queued, not taken) for {grace_s:g}s"
    return None
