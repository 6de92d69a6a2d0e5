"""Human review on the fleet: decisions that travel through Redis.

Rules:

- a run that a scheduler drives (its log is locked) gets a decision as a request in
  ``pact:review:<run>`` (``pact_workers.fleet.keys``); the driving scheduler takes
  every request at its next turn and logs ``review_decided`` for each item that still
  awaits review (a request for anything else is dropped, logged as a warning);
- a run nobody drives (the service paused it for review and let it go) gets the
  decision in its log at once, then a resume, and is marked active in the run
  registry: a scheduler service adopts it and carries on, as after any failover.

The run loop imports this module for embedded runs too: redis-py and the fleet's
modules are imported by the functions that talk to Redis, not here.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, ValidationError

from pact_workers.errors import BrokerUnavailable, InputError
from scheduler.gates.events import ReviewDecided
from scheduler.launch import load_state
from scheduler.project import ProjectDir
from scheduler.resume import compute_resume_strategy, execute_resume
from scheduler.state import RunState

if TYPE_CHECKING:
    import redis

log = logging.getLogger(__name__)


class ReviewRequest(BaseModel):
    """One human decision on one item (``component/phase``)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    item: str
    approved: bool
    by: str
    note: str = ""


@contextmanager
def fleet_client(broker_url: str) -> Iterator[redis.Redis]:
    """A Redis client for ``broker_url``; Redis errors become BrokerUnavailable."""
    import redis

    from pact_workers.fleet.connection import check_redis_url, redact, redis_from_url

    client = redis_from_url(check_redis_url(broker_url))
    try:
        yield client
    except redis.RedisError as exc:
        raise BrokerUnavailable(f"{redact(broker_url)}: {exc}") from exc
    finally:
        client.close()


def hand_back(project_dir: Path, broker_url: str) -> str | None:
    """Resume a run nobody drives and mark it active for the scheduler services;
    returns its id, or None when the run is not a service's (not in the registry: the
    caller resumes it itself).

    Raises:
        InputError: the run cannot be resumed (it is not paused or failed).
        BrokerUnavailable: Redis cannot be reached.
    """
    from pact_workers.fleet import keys
    from scheduler.registry import update_run

    project = ProjectDir(project_dir)
    state, _ = load_state(project)
    with fleet_client(broker_url) as client:
        if not client.hexists(keys.RUNS, state.run_id):
            return None
    try:
        strategy = compute_resume_strategy(state, project)
    except ValueError as exc:
        raise InputError(f"{project_dir}: cannot hand the run back: {exc}") from exc
    with fleet_client(broker_url) as client:
        execute_resume(state, strategy)
        update_run(client, state.run_id, state="active", reason="")
    return state.run_id


def send_review_request(client: redis.Redis, run_id: str, request: ReviewRequest) -> None:
    """Leave ``request`` for the scheduler that drives run ``run_id``."""
    from pact_workers.fleet import keys

    key = keys.review_requests(run_id)
    with client.pipeline(transaction=True) as pipe:
        pipe.rpush(key, request.model_dump_json())
        pipe.expire(key, keys.REVIEW_TTL_S)
        pipe.execute()


def take_review_requests(client: redis.Redis, run_id: str) -> list[ReviewRequest]:
    """Every request left for run ``run_id``, removed as they are read."""
    from pact_workers.fleet import keys
    from pact_workers.fleet.wire import read_or_discard

    key = keys.review_requests(run_id)

    def take() -> list[bytes]:
        with client.pipeline(transaction=True) as pipe:
            pipe.lrange(key, 0, -1)
            pipe.delete(key)
            raw, _ = pipe.execute()
        return list(raw)

    requests = []
    for entry in read_or_discard(client, key, take, expected="list", what="review decisions") or []:
        try:
            requests.append(ReviewRequest.model_validate_json(entry))
        except ValidationError as exc:
            log.warning("run %s: ignored a review request that is not one: %s", run_id, exc)
    return requests


def decision_events(state: RunState, requests: list[ReviewRequest]) -> list[ReviewDecided]:
    """The ``review_decided`` events of the requests whose item awaits review."""
    events = []
    for request in requests:
        item = state.items.get(request.item)
        held = item.gates.review if item is not None else None
        if item is None or held is None:
            log.warning(
                "run %s: review of %s dropped: it does not await review",
                state.run_id,
                request.item,
            )
            continue
        events.append(
            ReviewDecided(
                component_id=item.component_id,
                phase=item.phase,
                attempt=held.attempt,
                approved=request.approved,
                by=request.by,
                note=request.note,
            )
        )
    return events
