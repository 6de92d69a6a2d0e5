"""Task messages lost from the broker, against a real redis-server: a sent attempt
whose message is neither on its queue nor taken by a worker is reported lost (the
run loop then dispatches a new attempt), one whose message waits is not, and a
queue too long to read is not taken for proof of anything."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from pact_workers.app import QUEUES
from pact_workers.fleet import redis_from_url
from pact_workers.fleet.heartbeats import heartbeat_worker
from pact_workers.fleet.leases import Leases
from pact_workers.models.work import Phase, TaskMessage
from scheduler.executors import messages
from scheduler.executors.base import LostAttempt
from scheduler.executors.celery import CeleryFleet, task_id

pytestmark = [pytest.mark.redis, pytest.mark.timeout(60)]

GRACE_S = 0.4
QUEUE = QUEUES["contract_author"]


@pytest.fixture
def client(redis_url: str) -> Iterator[redis.Redis]:
    with redis_from_url(redis_url) as c:
        yield c


@pytest.fixture
def fleet(redis_url: str) -> Iterator[CeleryFleet]:
    # A short lease TTL reads leases every 0.1 s; a short grace reports within a second.
    f = CeleryFleet(redis_url, lease_ttl_s=0.4, claim_grace_s=GRACE_S)
    try:
        yield f
    finally:
        f.close()


def send(fleet: CeleryFleet, *components: str) -> list[TaskMessage]:
    tasks = [
        TaskMessage(run_id="r1", component_id=c, phase=Phase.CONTRACT, attempt=1, agent="noop")
        for c in components
    ]
    for task in tasks:
        fleet.submit(task)
    fleet.flush()
    return tasks


def lose(client: redis.Redis, task: TaskMessage) -> None:
    """Take ``task``'s message off its queue, as a worker that popped it and then
    lost Redis before recording it as taken."""
    pop(client, task)


def take(client: redis.Redis, task: TaskMessage) -> None:
    """Move ``task``'s message from its queue to the taken ones, as kombu's Redis
    transport does for a worker that pops it (the ``unacked`` hash, by delivery tag)."""
    message = pop(client, task)
    tag = message["properties"]["delivery_tag"]
    client.hset("unacked", tag, json.dumps([message, "", QUEUE]))


def pop(client: redis.Redis, task: TaskMessage) -> dict[str, Any]:
    """Remove ``task``'s message from its queue; returns it."""
    for raw in client.lrange(QUEUE, 0, -1):
        message: dict[str, Any] = json.loads(raw)
        if message["headers"]["id"] == task_id(task):
            assert client.lrem(QUEUE, 1, raw) == 1
            return message
    raise AssertionError(f"{task_id(task)} is not on {QUEUE}")


def reported(fleet: CeleryFleet, within_s: float) -> list[tuple[str, Phase, int]]:
    return [lost.lease for lost in reported_why(fleet, within_s)]


def reported_why(fleet: CeleryFleet, within_s: float) -> list[LostAttempt]:
    found: list[LostAttempt] = []
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        found += fleet.lost("r1")
        time.sleep(0.05)
    return found


def test_a_sent_attempt_whose_message_is_nowhere_is_reported_lost_once(
    client: redis.Redis, fleet: CeleryFleet
) -> None:
    _, gone = send(fleet, "waits", "gone")
    lose(client, gone)
    # Not before the grace twice over (sent that long ago, missing that long).
    assert reported(fleet, GRACE_S) == []
    assert reported_why(fleet, 6 * GRACE_S) == [
        LostAttempt(
            ("gone", Phase.CONTRACT, 1),
            f"its message was nowhere on the broker (not queued, not taken) for {GRACE_S}s",
        )
    ]
    # The one still waiting on its queue is never reported, however long it waits.
    assert reported(fleet, 4 * GRACE_S) == []
    assert client.llen(QUEUE) == 1


def test_a_taken_message_whose_lease_nobody_claimed_is_reported_lost_after_the_grace(
    client: redis.Redis, fleet: CeleryFleet
) -> None:
    dead, alive = send(fleet, "dead", "alive")
    # Both taken; only the second's worker lived to claim its lease (and renews it).
    take(client, dead)
    take(client, alive)
    Leases(client, ttl_s=60).claim(alive, "w1")
    assert reported(fleet, GRACE_S) == []
    assert reported_why(fleet, 6 * GRACE_S) == [
        LostAttempt(
            ("dead", Phase.CONTRACT, 1),
            f"a worker took its message and did not claim it within {GRACE_S}s (it died)",
        )
    ]
    assert reported(fleet, 4 * GRACE_S) == []


def test_a_message_found_again_is_not_reported(client: redis.Redis, fleet: CeleryFleet) -> None:
    (task,) = send(fleet, "back")
    raw = next(iter(client.lrange(QUEUE, 0, -1)))
    lose(client, task)
    assert reported(fleet, 1.5 * GRACE_S) == []  # seen missing, not yet for the grace
    client.lpush(QUEUE, raw)  # a worker put it back after reconnecting
    assert reported(fleet, 6 * GRACE_S) == []


def test_a_queue_too_long_to_read_proves_nothing_until_it_drains(
    client: redis.Redis, fleet: CeleryFleet, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(messages, "QUEUE_SCAN_LIMIT", 1)
    first, second, _ = send(fleet, "first", "second", "third")
    lose(client, first)  # two still wait: longer than the limit, so not read
    assert reported(fleet, 6 * GRACE_S) == []
    lose(client, second)  # one waits: read, and the two lost ones are missing from it
    assert sorted(reported(fleet, 6 * GRACE_S)) == [
        ("first", Phase.CONTRACT, 1),
        ("second", Phase.CONTRACT, 1),
    ]
    assert reported(fleet, 2 * GRACE_S) == []


def test_many_runs_share_each_read_of_a_queue(client: redis.Redis, fleet: CeleryFleet) -> None:
    runs = [f"r{i}" for i in range(1, 6)]
    tasks = [
        TaskMessage(run_id=run, component_id="c", phase=Phase.CONTRACT, attempt=1, agent="noop")
        for run in runs
    ]
    for task in tasks:
        fleet.submit(task)
    fleet.flush()
    for task in tasks:
        lose(client, task)
    before = int(client.info("commandstats").get("cmdstat_lrange", {}).get("calls", 0))
    started = time.monotonic()
    found: dict[str, list[tuple[str, Phase, int]]] = {run: [] for run in runs}
    while time.monotonic() - started < 6 * GRACE_S:
        for run in runs:
            found[run] += [lost.lease for lost in fleet.lost(run)]
        time.sleep(0.02)
    elapsed = time.monotonic() - started
    assert found == {run: [("c", Phase.CONTRACT, 1)] for run in runs}
    reads = int(client.info("commandstats")["cmdstat_lrange"]["calls"]) - before
    # One queue, read at most every quarter grace whatever the number of runs asking.
    assert 1 <= reads <= elapsed / (GRACE_S / 4) + 1


def send_pack(fleet: CeleryFleet, client: redis.Redis, *components: str) -> list[TaskMessage]:
    """Send ``components``' attempts as one pack: one slot serves the role, and its
    attempts are known to be short (scheduler.executors.packing)."""
    heartbeat_worker(client, "one-slot", {"roles": ["contract_author"], "concurrency": 1}, 60)
    fleet.packer.observe("contract_author", 0.01)
    tasks = send(fleet, *components)
    assert client.llen(QUEUE) == 1 and fleet.packer.packs_sent == 1
    return tasks


def test_a_packs_members_are_found_waiting_by_any_scheduler_and_reported_once_lost(
    client: redis.Redis, fleet: CeleryFleet, redis_url: str
) -> None:
    tasks = send_pack(fleet, client, "a", "b", "c")
    # A scheduler that adopted the run (the sender died) knows nothing of the pack: it
    # finds each member by its id in the pack's header.
    adopter = CeleryFleet(redis_url, lease_ttl_s=0.4, claim_grace_s=GRACE_S)
    try:
        adopter.adopt([("r1", t.component_id, t.phase, t.attempt) for t in tasks])
        assert reported(fleet, 4 * GRACE_S) == [] and adopter.lost("r1") == []
        (raw,) = client.lrange(QUEUE, 0, -1)
        client.lrem(QUEUE, 1, raw)  # a worker popped it and lost Redis
        expected = [(t.component_id, Phase.CONTRACT, 1) for t in tasks]
        assert sorted(reported(fleet, 6 * GRACE_S)) == expected
        found: list[tuple[str, Phase, int]] = []
        deadline = time.monotonic() + 6 * GRACE_S
        while time.monotonic() < deadline:
            found += [lost.lease for lost in adopter.lost("r1")]
            time.sleep(0.05)
        assert sorted(found) == expected
    finally:
        adopter.close()


def test_a_taken_pack_whose_members_nobody_claimed_is_reported_lost_after_the_grace(
    client: redis.Redis, fleet: CeleryFleet
) -> None:
    tasks = send_pack(fleet, client, "a", "b")
    (raw,) = client.lrange(QUEUE, 0, -1)
    client.lrem(QUEUE, 1, raw)
    message = json.loads(raw)
    client.hset("unacked", message["properties"]["delivery_tag"], json.dumps([message, "", QUEUE]))
    # The worker that took it lived to claim only its first member.
    Leases(client, ttl_s=60).claim(tasks[0], "w1")
    assert reported(fleet, GRACE_S) == []
    assert reported_why(fleet, 6 * GRACE_S) == [
        LostAttempt(
            ("b", Phase.CONTRACT, 1),
            f"a worker took its message and did not claim it within {GRACE_S}s (it died)",
        )
    ]
