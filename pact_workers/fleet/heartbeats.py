"""Worker heartbeats: which workers are alive, what roles they serve, with how many slots.

Each worker's main process sets ``pact:worker:<id>`` every few seconds with a TTL of
three beats (:class:`pact_workers.tasks.WorkerHeartbeat`); ``pact workers``, ``pact
doctor`` and the scheduler read them.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Mapping
from typing import Any

import redis
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from pact_workers.fleet import keys
from pact_workers.fleet.wire import discard
from pact_workers.models.documents import validation_problems

__all__ = ["heartbeat_worker", "live_workers"]

log = logging.getLogger(__name__)


class Heartbeat(BaseModel):
    """What a heartbeat must hold to be listed (anyone can write a ``pact:worker:`` key;
    other fields are kept as they are)."""

    model_config = ConfigDict(extra="allow", allow_inf_nan=False)

    roles: list[str] = Field(default_factory=list)
    hostname: str = ""
    pid: int | None = None
    concurrency: int | None = None
    heartbeat_at: float
    started_at: float | None = None


def _ms(seconds: float) -> int:
    return max(1, round(seconds * 1000))


def heartbeat_worker(
    client: redis.Redis, worker_id: str, info: Mapping[str, Any], ttl_s: float
) -> None:
    """Record that worker ``worker_id`` is alive for ``ttl_s`` (call every ttl_s / 3).

    Args:
        client: a Redis client.
        worker_id: the worker's id (e.g. Celery's hostname ``celery@host``).
        info: JSON-serialisable facts about it: roles, hostname, pid...
        ttl_s: how long the key outlives the last heartbeat.
    """
    doc = {**info, "worker_id": worker_id, "heartbeat_at": time.time()}
    client.set(keys.worker(worker_id), json.dumps(doc, sort_keys=True), px=_ms(ttl_s))


def live_workers(client: redis.Redis) -> dict[str, dict[str, Any]]:
    """Every worker with a live heartbeat: worker id -> what it last reported."""
    found = sorted(client.scan_iter(match=keys.WORKER_PATTERN, count=500))
    if not found:
        return {}
    workers: dict[str, dict[str, Any]] = {}
    prefix = len(keys.worker(""))
    for key, raw in zip(found, client.mget(found), strict=True):
        name = key.decode(errors="replace") if isinstance(key, bytes) else str(key)
        if raw is None:
            # Expired between SCAN and MGET, or a key of another type (MGET gives it as
            # nil): no heartbeat, and the latter would never expire.
            discard(client, name, expected="string", what="a worker's heartbeat")
            continue
        try:
            beat = Heartbeat.model_validate_json(raw)
        except ValidationError as exc:
            problem = validation_problems(exc, "the heartbeat", limit=1)
            log.warning("unreadable worker heartbeat %s (%s); skipped", name, problem)
            continue
        workers[name[prefix:]] = beat.model_dump(exclude_unset=True)
    return workers
