"""Keys anyone who can write to the fleet's Redis can leave garbage in, where a script
reads them, on a real redis-server: the entries of ``pact:schedulers`` and
``pact:runs:in_flight`` that every scheduler's loop reads in one script. A garbage
entry is dropped and named, never an error of every scheduler's loop."""

from __future__ import annotations

import json
import logging

import pytest
import redis

from pact_workers.fleet import keys
from scheduler.capacity import FleetCaps

CAPS = {"code_author": 4}


def _now_ms(client: redis.Redis) -> int:
    seconds, micros = client.time()
    return int(seconds * 1000 + micros // 1000)


@pytest.mark.parametrize(
    ("key", "doc"),
    [
        (keys.SCHEDULERS, {"reserved": 5}),
        (keys.SCHEDULERS, {"reserved": None}),
        (keys.SCHEDULERS, {"ready": {"code_author": "many"}}),
        (keys.SCHEDULERS, {"ready": [1, 2]}),
        (keys.SCHEDULERS, {"runs": {"a": 1}}),
        (keys.SCHEDULERS, {"reserved": {"code_author": -100}}),
        (keys.SCHEDULERS, {"reserved": {"code_author": 1e300}}),
        (keys.SCHEDULERS, {"future": True}),
        (keys.RUNS_IN_FLIGHT, {"n": 7}),
        (keys.RUNS_IN_FLIGHT, {"n": {"code_author": "x"}}),
        (keys.RUNS_IN_FLIGHT, {"n": {"code_author": -100}}),
        (keys.RUNS_IN_FLIGHT, {"n": {"code_author": 1e300}}),
        (keys.RUNS_IN_FLIGHT, {"future": True}),
    ],
    ids=[
        "reserved-a-number",
        "reserved-null",
        "ready-not-a-number",
        "ready-a-list",
        "runs-not-a-number",
        "reserved-negative",
        "reserved-huge",
        "scheduler-from-the-future",
        "counts-a-number",
        "count-not-a-number",
        "count-negative",
        "count-huge",
        "run-from-the-future",
    ],
)
def test_a_garbage_entry_read_by_every_schedulers_loop_is_dropped_and_named(
    redis_url: str, caplog: pytest.LogCaptureFixture, key: str, doc: dict[str, object]
) -> None:
    """It made the caps script fail (pairs() of a number, arithmetic on a string), so
    each loop of every scheduler failed and was tried again for ever; or it counted
    slots that were never taken (a negative count gave more than the cap, a huge one or
    an entry dated in the future, which never went stale, none at all)."""
    client = redis.Redis.from_url(redis_url)
    me = FleetCaps(client, "host:1:aaaaaa", caps=CAPS, ttl_s=30)
    now = _now_ms(client)
    if doc.pop("future", False):
        doc = {"reserved": {"code_author": 4}, "n": {"code_author": 4}}
        at = now + 10**12
    else:
        at = now
    client.hset(key, "garbage", json.dumps({"at": at, **doc}))
    with caplog.at_level(logging.WARNING):
        grant = me.reserve({"r1": {}}, {"code_author": 9})
    assert grant.slots == {"code_author": 4}
    assert not client.hexists(key, "garbage")
    assert any(key in r.getMessage() and "garbage" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize("key", [keys.SCHEDULERS, keys.RUNS_IN_FLIGHT])
def test_a_caps_hash_of_the_wrong_type_is_replaced_and_the_loop_goes_on(
    redis_url: str, caplog: pytest.LogCaptureFixture, key: str
) -> None:
    client = redis.Redis.from_url(redis_url)
    me = FleetCaps(client, "host:1:aaaaaa", caps=CAPS, ttl_s=30)
    client.set(key, "not a hash")
    with caplog.at_level(logging.ERROR):
        grant = me.reserve({"r1": {"code_author": 1}}, {"code_author": 9})
    assert grant.slots == {"code_author": 3}
    assert f"{key} is a Redis string, not a hash" in caplog.text
    assert client.type(key) == b"hash"


def test_a_runs_registry_or_active_set_of_the_wrong_type_is_replaced_when_a_run_is_updated(
    redis_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The merge script failed with WRONGTYPE, so no run's entry could be written: a
    scheduler's loop failed on it at every turn."""
    from scheduler.registry import get_run, update_run

    client = redis.Redis.from_url(redis_url)
    client.set(keys.RUNS, "not a registry")
    client.set(keys.ACTIVE_RUNS, "not a set")
    with caplog.at_level(logging.ERROR):
        update_run(client, "r1", name="t", state="active")
    assert f"{keys.RUNS} is a Redis string" in caplog.text
    assert f"{keys.ACTIVE_RUNS} is a Redis string" in caplog.text
    entry = get_run(client, "r1")
    assert entry is not None and entry.state == "active"
    assert client.smembers(keys.ACTIVE_RUNS) == {b"r1"}
