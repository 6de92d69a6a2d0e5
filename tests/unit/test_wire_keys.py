"""Keys anyone who can write to the fleet's Redis can leave garbage in, read where they
are read: an action-cache entry, a planning answer, a worker's heartbeat, Celery's
queues and unacked hash, an artifact blob, the runs registry. Each garbage value is
refused at its reader, named in one log line or error, never a traceback. fakeredis:
no Lua here (the scripts' readers are tried in tests/integration/test_wire_keys.py)."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import fakeredis
import pytest

from pact_workers.fleet import keys

ACTION = "sha256:" + "a" * 64


@pytest.fixture
def fake() -> Iterator[fakeredis.FakeRedis]:
    client = fakeredis.FakeRedis()
    yield client
    client.close()


def test_an_action_cache_entry_of_the_wrong_type_is_a_miss_logged_once_and_deleted(
    fake: fakeredis.FakeRedis, caplog: pytest.LogCaptureFixture
) -> None:
    from scheduler.cache.redis import RedisActionCache

    cache = RedisActionCache(fake, ttl_s=60)
    fake.rpush(keys.action(ACTION), "not an entry")
    with caplog.at_level(logging.WARNING):
        assert cache.get(ACTION) is None
    [record] = [r for r in caplog.records if keys.action(ACTION) in r.getMessage()]
    assert "not a string" in record.getMessage()
    assert not fake.exists(keys.action(ACTION))
    assert cache.get(ACTION) is None  # a plain miss now
