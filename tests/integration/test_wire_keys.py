"""Keys anyone who can write to the fleet's Redis can leave garbage in, where a script
reads them, on a real redis-server: the entries of ``pact:schedulers`` and
``pact:runs:in_flight`` that every scheduler's loop reads in one script. A garbage
entry is dropped and named, never an error of every scheduler's loop."""

from __future__ import annotations

import json
import logging
import time

import pytest
import redis

from pact_workers.fleet import keys
from pact_workers.fleet.leases import Leases
from pact_workers.models.work import Phase, TaskMessage
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


def _task(attempt: int = 1) -> TaskMessage:
    return TaskMessage(
        run_id="r1", component_id="c", phase=Phase.CONTRACT, attempt=attempt, reply_to="x"
    )


@pytest.mark.parametrize(
    "value",
    [b"1e9", b"inf", b"0x10", b" 5", b"+9", b"5_0", b"\xff\xfe", b"9" * 40, b"-3", b""],
)
def test_a_current_attempt_that_is_no_attempt_number_counts_as_absent_for_every_reader(
    redis_url: str, value: bytes
) -> None:
    """Workers read ``pact:attempt:`` in Python (before a renewal) and in a script (to
    start): the script took '1e9', '0x10' or ' 5' for numbers and skipped the attempt as
    superseded, where Python found them unreadable and ran it. Only decimal digits are
    an attempt number; anything else counts as absent (the attempt runs), for both."""
    client = redis.Redis.from_url(redis_url)
    leases = Leases(client, ttl_s=10)
    task = _task()
    client.set(keys.current_attempt("r1", "c", "contract"), value)
    assert leases.is_current(task)
    assert leases.start(task, "w1") is not None


def test_a_current_attempt_key_of_the_wrong_type_counts_as_absent_and_the_lease_is_renewed(
    redis_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """It failed the start with WRONGTYPE (the worker said Redis was unreachable and
    ran nothing), and failed every renewal of a running attempt's lease (the check that
    it is still current comes first), so the lease expired under a live worker and its
    attempt was dispatched again."""
    client = redis.Redis.from_url(redis_url)
    leases = Leases(client, ttl_s=10)
    task = _task()
    current = keys.current_attempt("r1", "c", "contract")
    client.rpush(current, "not an attempt number")
    hold = leases.start(task, "w1")
    assert hold is not None
    client.pexpire(hold.key, 500)
    with caplog.at_level(logging.WARNING):
        assert hold.renew()
    assert client.pttl(hold.key) > 5000
    assert hold.failures == 0 and not hold.cancelled.is_set()
    assert f"{current} is a Redis list" in caplog.text
    # A newer attempt, recorded as the scheduler records it, still supersedes.
    leases.dispatch(_task(2))
    assert not leases.is_current(task)


def test_lease_and_done_keys_that_are_none_are_no_lease_and_no_result(
    redis_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A lease that is no string failed every lease check of the run's owner with
    WRONGTYPE (every loop, every run it drove); a lease value that is neither queued,
    sent nor running kept its attempt neither alive nor lost until the role's timeout,
    and so did a done marker that is no string (a worker's publish took it for a
    result already published). Each is now no lease (no result): the attempt is lost
    and dispatched again."""
    from scheduler.executors.base import LEASE_EXPIRED
    from scheduler.executors.celery import CeleryFleet

    fleet = CeleryFleet(redis_url, lease_ttl_s=0.4, claim_grace_s=0.5)
    client = fleet.client
    try:
        tasks = [
            TaskMessage(run_id="r1", component_id=c, phase=Phase.CONTRACT, attempt=1, agent="noop")
            for c in ("garbled", "listed", "marked")
        ]
        for task in tasks:
            fleet.submit(task)
        fleet.flush()
        garbled, listed, marked = (keys.lease("r1", t.component_id, "contract", 1) for t in tasks)
        client.set(garbled, "garbage")
        client.delete(listed)
        client.rpush(listed, "not a lease")
        client.delete(marked)
        client.rpush(keys.done("r1", "marked", "contract", 1), "not a marker")
        found = []
        with caplog.at_level(logging.WARNING):
            for _ in range(20):
                assert fleet.alive("r1") == []
                found += fleet.lost("r1")
                time.sleep(0.05)
        assert sorted((lost.lease[0], lost.why) for lost in found) == [
            ("garbled", LEASE_EXPIRED),
            ("listed", LEASE_EXPIRED),
            ("marked", LEASE_EXPIRED),
        ]
        assert garbled in caplog.text and listed in caplog.text
    finally:
        fleet.close()


def test_a_done_marker_that_is_no_string_does_not_stop_a_result_being_published(
    redis_url: str,
) -> None:
    client = redis.Redis.from_url(redis_url)
    leases = Leases(client, ttl_s=10)
    task = _task()
    done = keys.done("r1", "c", "contract", 1)
    client.rpush(done, "not a marker")
    assert leases.finish(task, keys.run_results("r1"), b"{}")
    assert client.get(done) == b"1"
    assert client.xlen(keys.run_results("r1")) == 1
    assert not leases.finish(task, keys.run_results("r1"), b"{}")  # once only


def test_a_worker_does_not_start_over_a_queue_key_that_is_no_list(redis_url: str) -> None:
    """kombu failed on such a key at every poll: the worker died with Celery's
    traceback, and its supervisor started it again, for ever."""
    import subprocess
    import sys

    client = redis.Redis.from_url(redis_url)
    client.set("pact.code_author", "not a queue")
    client.hset("pact.integrator\x06\x163", "a", "b")  # a priority step's list
    argv = [sys.executable, "-m", "scheduler.cli", "worker", "--broker", redis_url]
    argv += ["--roles", "code_author,integrator", "--no-supervise"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stdout + done.stderr
    message = " ".join(done.stderr.split())
    assert "'pact.code_author' (a Redis string)" in message, message
    assert "'pact.integrator\\x06\\x163' (a Redis hash)" in message, message
    assert "no Celery queue" in message and "Delete it" in message
    assert "Traceback" not in done.stderr
    # The keys are Celery's: left as they were.
    assert client.get("pact.code_author") == b"not a queue"
    client.close()
