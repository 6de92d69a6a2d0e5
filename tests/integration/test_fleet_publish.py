"""How the scheduler publishes a turn's tasks, against a real redis-server: one
pipeline for the whole batch, and the one-message-at-a-time path (with the retry
policy that waits out a broker restart) when the batch cannot be sent."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator

import pytest
import redis
from kombu import Producer

from pact_workers.app import QUEUES
from pact_workers.fleet import redis_from_url
from pact_workers.models.work import Phase, TaskMessage
from scheduler.executors.celery import CeleryFleet, task_id

pytestmark = [pytest.mark.redis, pytest.mark.timeout(120)]

RUN = "pub1"


@pytest.fixture
def fleet(redis_url: str) -> Iterator[CeleryFleet]:
    fleet = CeleryFleet(redis_url)
    yield fleet
    fleet.close()


def tasks(n: int) -> list[TaskMessage]:
    return [
        TaskMessage(run_id=RUN, component_id=f"c{i}", phase=Phase.CONTRACT, attempt=1)
        for i in range(n)
    ]


def queued_ids(redis_url: str) -> list[str]:
    client = redis_from_url(redis_url)
    try:
        raw = client.lrange(QUEUES["contract_author"], 0, -1)
    finally:
        client.close()
    return sorted(json.loads(m)["headers"]["id"] for m in raw)


def test_a_turns_tasks_are_published_in_one_pipeline(
    fleet: CeleryFleet, redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    pushes: list[int] = []
    execute = redis.client.Pipeline.execute

    def counted(self: redis.client.Pipeline, *args: object, **kwargs: object) -> object:
        names = [str(cmd[0][0]).upper() for cmd in self.command_stack]
        if "LPUSH" in names:
            pushes.append(names.count("LPUSH"))
        return execute(self, *args, **kwargs)

    monkeypatch.setattr(redis.client.Pipeline, "execute", counted)
    sent = tasks(25)
    for task in sent:
        fleet.submit(task)
    fleet.flush()
    assert pushes == [25]
    assert queued_ids(redis_url) == sorted(task_id(t) for t in sent)


def test_a_batch_that_cannot_be_sent_goes_one_message_at_a_time(
    fleet: CeleryFleet,
    redis_url: str,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    def broken(self: Producer, max_size: int = 1000) -> object:
        raise redis.ConnectionError("the broker went away mid-batch")

    monkeypatch.setattr(Producer, "batch", broken)
    sent = tasks(5)
    for task in sent:
        fleet.submit(task)
    with caplog.at_level(logging.WARNING, logger="scheduler.executors.celery"):
        fleet.flush()
    assert "batched publish failed" in caplog.text
    assert queued_ids(redis_url) == sorted(task_id(t) for t in sent)


def test_a_queue_is_declared_with_its_first_message_only(
    fleet: CeleryFleet, redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first message to a role queue declares it (on an empty Redis: without the
    declaration the message would be routed nowhere); later ones do not again."""
    declared: list[str] = []
    real = Producer.maybe_declare

    def counted(self: Producer, entity: object, *args: object, **kwargs: object) -> object:
        declared.append(str(getattr(entity, "name", entity)))
        return real(self, entity, *args, **kwargs)

    monkeypatch.setattr(Producer, "maybe_declare", counted)
    first, second = tasks(6)[:3], tasks(6)[3:]
    for task in first:
        fleet.submit(task)
    fleet.flush()
    for task in second:
        fleet.submit(task)
    fleet.flush()
    assert declared == [QUEUES["contract_author"]]
    assert queued_ids(redis_url) == sorted(task_id(t) for t in first + second)
