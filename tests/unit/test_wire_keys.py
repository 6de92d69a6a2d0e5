"""Keys anyone who can write to the fleet's Redis can leave garbage in, read where they
are read: an action-cache entry, a planning answer, a worker's heartbeat, Celery's
queues and unacked hash, an artifact blob, the runs registry. Each garbage value is
refused at its reader, named in one log line or error, never a traceback. fakeredis:
no Lua here (the scripts' readers are tried in tests/integration/test_wire_keys.py)."""

from __future__ import annotations

import json
import logging

import fakeredis
import pytest

from pact_workers.fleet import keys

ACTION = "sha256:" + "a" * 64


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


class _Replier:
    """Celery's place in a planning call: instead of a worker, garbage is the answer."""

    def __init__(self, client: fakeredis.FakeRedis, reply: bytes) -> None:
        self.client = client
        self.reply = reply

    def send_task(self, name: str, *, args: list[dict[str, str]], **_: object) -> None:
        self.client.rpush(keys.plan_reply(args[0]["plan_id"]), self.reply)


@pytest.mark.parametrize(
    "reply",
    [
        b"not json",
        b"\xff\xfe",
        b"[1, 2]",
        b'"a string"',
        b"{}",
        b'{"usage": {}}',
        b'{"data": {}, "usage": {"input_tokens": "many"}}',
        b'{"data": {}, "usage": [1]}',
        b'{"error": ["not", "text"]}',
        b'{"error": "boom", "error_class": ["x"]}',
        b"[" * 100_000,
    ],
    ids=[
        "not-json",
        "not-utf8",
        "a-list",
        "a-string",
        "empty",
        "no-data",
        "bad-usage",
        "usage-a-list",
        "error-not-text",
        "error-class-a-list",
        "deep",
    ],
)
def test_a_planning_answer_that_is_not_one_is_a_planning_error_naming_its_key(
    fake: fakeredis.FakeRedis, reply: bytes
) -> None:
    from scheduler.planning.fleet import FleetPlanner
    from scheduler.planning.plan import PlanningError

    planner = FleetPlanner("redis://127.0.0.1:1/0", agent="replay", agent_options={})
    planner.client = fake
    planner.celery = _Replier(fake, reply)  # type: ignore[assignment]
    with pytest.raises(PlanningError, match=r"pact:plan:\w+ .*not a planning answer"):
        planner.interview("build a thing")
    assert fake.keys("pact:plan:*") == []


def test_a_planning_answer_that_is_one_is_used(fake: fakeredis.FakeRedis) -> None:
    from pact_workers.errors import TransientAgentError
    from scheduler.planning.fleet import FleetPlanner

    planner = FleetPlanner("redis://127.0.0.1:1/0", agent="replay", agent_options={})
    planner.client = fake
    planner.celery = _Replier(fake, b'{"data": {"q": 1}, "usage": {"input_tokens": 3}}')  # type: ignore[assignment]
    answer = planner.interview("build a thing")
    assert answer.data == {"q": 1} and answer.usage.input_tokens == 3
    planner.celery = _Replier(fake, b'{"error": "busy", "error_class": "transient"}')  # type: ignore[assignment]
    with pytest.raises(TransientAgentError, match="busy"):
        planner.interview("build a thing")


class _Squatter(_Replier):
    """The answer's key is made a string before any answer comes."""

    def send_task(self, name: str, *, args: list[dict[str, str]], **_: object) -> None:
        self.client.set(keys.plan_reply(args[0]["plan_id"]), self.reply)


def test_a_planning_answer_key_of_the_wrong_type_is_a_planning_error_and_deleted(
    fake: fakeredis.FakeRedis, caplog: pytest.LogCaptureFixture
) -> None:
    from scheduler.planning.fleet import FleetPlanner
    from scheduler.planning.plan import PlanningError

    planner = FleetPlanner("redis://127.0.0.1:1/0", agent="replay", agent_options={})
    planner.client = fake
    planner.celery = _Squatter(fake, b"squatted")  # type: ignore[assignment]
    with caplog.at_level(logging.ERROR), pytest.raises(PlanningError, match=r"pact:plan:\w+ was"):
        planner.interview("build a thing")
    assert "not a list" in caplog.text
    assert fake.keys("pact:plan:*") == []


@pytest.mark.parametrize(
    "doc",
    [
        b"not json",
        b"\xff",
        b"[" * 100_000,
        b'[["roles", 5]]',
        b'{"roles": 5, "heartbeat_at": 1}',
        b'{"roles": [1, 2], "heartbeat_at": 1}',
        b'{"roles": ["contract_author"], "heartbeat_at": "yesterday"}',
        b'{"roles": ["contract_author"], "heartbeat_at": 1, "concurrency": "four"}',
        b'{"roles": ["contract_author"], "heartbeat_at": NaN}',
        b'{"roles": ["contract_author"], "heartbeat_at": 1, "pid": [1]}',
    ],
    ids=[
        "not-json",
        "not-utf8",
        "deep",
        "pairs",
        "roles-a-number",
        "roles-not-text",
        "time-not-a-number",
        "concurrency-not-a-number",
        "time-nan",
        "pid-a-list",
    ],
)
def test_a_heartbeat_that_is_not_one_is_skipped_and_named_once(
    fake: fakeredis.FakeRedis, caplog: pytest.LogCaptureFixture, doc: bytes
) -> None:
    """``pact workers``, ``pact doctor`` and a run's fleet check crashed on one (a
    TypeError joining roles that are no list of names, a ValueError on a heartbeat time
    that is no number), and so did the scheduler's packer counting the fleet's slots."""
    from pact_workers.fleet.heartbeats import heartbeat_worker, live_workers
    from scheduler.commands.fleet import roles_without_workers
    from scheduler.executors.packing import fleet_slots

    heartbeat_worker(fake, "good", {"roles": ["contract_author"], "concurrency": 2}, ttl_s=60)
    fake.set(keys.worker("bad"), doc)
    with caplog.at_level(logging.WARNING):
        found = live_workers(fake)
    assert list(found) == ["good"]
    [record] = [r for r in caplog.records if keys.worker("bad") in r.getMessage()]
    assert "heartbeat" in record.getMessage()
    assert "contract_author" not in roles_without_workers(found)
    assert fleet_slots(fake) == {"contract_author": 2}


def test_a_heartbeat_key_of_another_type_is_named_and_deleted(
    fake: fakeredis.FakeRedis, caplog: pytest.LogCaptureFixture
) -> None:
    """MGET gives such a key as nil, which read as a heartbeat that had just expired:
    it was skipped without a word, and stayed (it has no TTL) for ever."""
    from pact_workers.fleet.heartbeats import heartbeat_worker, live_workers

    heartbeat_worker(fake, "good", {"roles": ["contract_author"]}, ttl_s=60)
    fake.rpush(keys.worker("bad"), "not a heartbeat")
    with caplog.at_level(logging.WARNING):
        assert list(live_workers(fake)) == ["good"]
    assert f"{keys.worker('bad')} is a Redis list, not a string" in caplog.text
    assert not fake.exists(keys.worker("bad"))


def _message(task_id: str) -> bytes:
    return json.dumps({"body": "", "headers": {"id": task_id}, "properties": {}}).encode()


GARBAGE_MESSAGES = [
    b"not json",
    b"\xff\xfe",
    b"[" * 100_000,
    b"5",
    b'"text"',
    b"{}",
    b'{"headers": 5}',
    b'{"headers": {"no": "id"}}',
    b'{"headers": ["id"]}',
]


def test_garbage_on_a_role_queue_holds_no_task_ids_and_a_queue_of_the_wrong_type_is_not_read(
    fake: fakeredis.FakeRedis, caplog: pytest.LogCaptureFixture
) -> None:
    """The scheduler's lost-message check read these (Celery's keys, never edited):
    JSON nested past the parser's depth crashed it (RecursionError), a queue that is
    no list failed it with WRONGTYPE, every check of every run."""
    from scheduler.executors.messages import queued_task_ids

    fake.rpush("pact.code_author", *GARBAGE_MESSAGES, _message("r1.c.implement.1"))
    fake.set("pact.test_author", "not a queue")
    with caplog.at_level(logging.WARNING):
        found = queued_task_ids(fake, ["pact.code_author", "pact.test_author"])
    assert found == {"pact.code_author": {"r1.c.implement.1"}, "pact.test_author": None}
    assert "pact.test_author is a Redis string, not a list" in caplog.text
    assert fake.get("pact.test_author") == b"not a queue"  # Celery's key: left alone


def test_garbage_in_celerys_unacked_hash_holds_no_task_ids(
    fake: fakeredis.FakeRedis, caplog: pytest.LogCaptureFixture
) -> None:
    from scheduler.executors.messages import taken_task_ids

    for i, raw in enumerate(GARBAGE_MESSAGES):
        fake.hset("unacked", f"tag{i}", raw)
    fake.hset("unacked", "good", b"[" + _message("r1.c.implement.1") + b', "", "pact.code_author"]')
    fake.hset("unacked", "deep", b"[" + b"[" * 100_000 + b"]")
    assert taken_task_ids(fake) == {"r1.c.implement.1"}
    fake.delete("unacked")
    fake.rpush("unacked", "not a hash")
    with caplog.at_level(logging.WARNING):
        assert taken_task_ids(fake) == set()
    assert "unacked is a Redis list, not a hash" in caplog.text
    assert fake.type("unacked") == b"list"  # Celery's key: left alone


def test_an_artifact_key_of_the_wrong_type_is_corrupt_said_so_and_sent_again(
    fake: fakeredis.FakeRedis, caplog: pytest.LogCaptureFixture
) -> None:
    """A worker reading it failed with WRONGTYPE (its attempt an error, every attempt),
    a bundle's read called it expired, and the scheduler, finding the key there and
    renewed, never sent the blob again."""
    from pact_workers.artifacts import digest_bytes
    from pact_workers.errors import ArtifactError
    from pact_workers.fleet.blobs import RedisBlobStore

    store = RedisBlobStore(fake, ttl_s=60)
    data = b"print('hello')\n"
    digest = digest_bytes(data)
    fake.rpush(keys.artifact(digest), "not a blob")
    with caplog.at_level(logging.ERROR), pytest.raises(ArtifactError, match="not a string"):
        store.get_blob(digest)
    assert f"{keys.artifact(digest)} is a Redis list" in caplog.text
    assert not fake.exists(keys.artifact(digest))

    fake.rpush(keys.artifact(digest), "not a blob")
    with pytest.raises(ArtifactError, match="not a string"):
        store.get_blobs([digest])
    fake.rpush(keys.artifact(digest), "not a blob")
    assert not store.has_blob(digest)
    fake.hset(keys.artifact(digest), "x", "y")
    assert store.put_and_renew([], [digest]) == [digest]  # to be written again
    assert store.put_blobs([data]) == [digest]
    assert store.get_blob(digest) == data


def test_a_runs_registry_of_the_wrong_type_is_replaced_and_holds_no_run(
    fake: fakeredis.FakeRedis, caplog: pytest.LogCaptureFixture
) -> None:
    """``pact runs`` and every scheduler starting (which indexes the active runs)
    failed with WRONGTYPE on it, and every update of a run's entry too."""
    from scheduler.registry import get_run, index_active_runs, list_runs

    fake.set(keys.RUNS, "not a registry")
    with caplog.at_level(logging.ERROR):
        assert list_runs(fake) == []
    assert f"{keys.RUNS} is a Redis string, not a hash" in caplog.text
    fake.rpush(keys.RUNS, "still not one")
    assert get_run(fake, "r1") is None
    fake.rpush(keys.RUNS, "still not one")
    assert index_active_runs(fake) == 0
    fake.hset(keys.RUNS, "r1", json.dumps({"run_id": "r1", "name": "t", "state": "active"}))
    assert [e.run_id for e in list_runs(fake)] == ["r1"]
    assert get_run(fake, "r1") is not None


@pytest.mark.parametrize("priority", [-5, 10**9, 10])
def test_a_registry_entry_with_a_priority_out_of_range_is_no_entry(
    fake: fakeredis.FakeRedis, priority: int
) -> None:
    """A scheduler gives each run 1 + its entry's priority turns per round: -5 gave
    -4, which never counts down to 0, so the run took every slot left in its round;
    10**9 put it first with as good as no end, starving the service's other runs.
    Submissions are checked for 0..9; so is the registry entry a scheduler reads."""
    from scheduler.registry import get_run

    doc = {"run_id": "r1", "name": "t", "state": "active", "priority": priority}
    fake.hset(keys.RUNS, "r1", json.dumps(doc))
    assert get_run(fake, "r1") is None
    fake.hset(keys.RUNS, "r1", json.dumps({**doc, "priority": keys.MAX_PRIORITY}))
    entry = get_run(fake, "r1")
    assert entry is not None and entry.priority == keys.MAX_PRIORITY


@pytest.mark.parametrize("duration", ["1e400", "1.7e308", "-1"])
def test_an_action_cache_entry_with_a_duration_no_attempt_takes_is_a_miss(
    caplog: pytest.LogCaptureFixture, duration: str
) -> None:
    """A hit logs the entry's duration as the time it saved: an infinite one was logged
    as null, which made the run's log unreadable (as a result's own duration was)."""
    from scheduler.cache.entry import CacheEntry

    doc = {"key": ACTION, "output": "sha256:" + "b" * 64, "component_id": "c", "phase": "contract"}
    raw = (json.dumps(doc)[:-1] + f', "duration_s": {duration}}}').encode()
    with caplog.at_level(logging.WARNING):
        assert CacheEntry.from_bytes(raw, ACTION) is None
    assert f"action cache entry {ACTION} is unreadable" in caplog.text


def test_a_registry_entry_with_an_overlong_name_is_no_entry_and_named_and_a_long_reason_is_cut(
    fake: fakeredis.FakeRedis, caplog: pytest.LogCaptureFixture
) -> None:
    """``pact runs --json`` printed whatever an entry held, whole; and an entry that was
    no entry was left out without a word."""
    from pact_workers.models.work import MAX_TEXT_CHARS
    from scheduler.registry import list_runs

    good = {"run_id": "r1", "name": "t", "state": "failed", "reason": "x" * 10**6}
    fake.hset(keys.RUNS, "r1", json.dumps(good))
    fake.hset(keys.RUNS, "r2", json.dumps({**good, "run_id": "r2", "name": "n" * 10**6}))
    fake.hset(keys.RUNS, "r3", json.dumps({**good, "run_id": "r3", "project_dir": "/" * 5000}))
    with caplog.at_level(logging.WARNING):
        entries = list_runs(fake)
    assert [e.run_id for e in entries] == ["r1"]
    assert len(entries[0].reason) < MAX_TEXT_CHARS + 40
    assert entries[0].reason.endswith(f"[{10**6 - MAX_TEXT_CHARS} characters cut]")
    assert f"{keys.RUNS} entry 'r2' is no run entry (name:" in caplog.text
    assert f"{keys.RUNS} entry 'r3' is no run entry (project_dir:" in caplog.text
    assert len(caplog.text) < 10_000  # named, not echoed


@pytest.mark.parametrize("field", ["run_id", "agent"])
def test_an_action_cache_entry_naming_an_overlong_run_or_agent_is_a_miss(
    caplog: pytest.LogCaptureFixture, field: str
) -> None:
    """A hit logs the run that recorded the entry: a megabyte of run id went into one
    line of the audit log."""
    from scheduler.cache.entry import CacheEntry

    doc = {"key": ACTION, "output": "sha256:" + "b" * 64, "component_id": "c", "phase": "contract"}

    def entry(text: str) -> CacheEntry | None:
        return CacheEntry.from_bytes(json.dumps({**doc, field: text}).encode(), ACTION)

    assert entry("r" * 255) is not None
    with caplog.at_level(logging.WARNING):
        assert entry("r" * 10**6) is None
    assert f"action cache entry {ACTION} is unreadable" in caplog.text
