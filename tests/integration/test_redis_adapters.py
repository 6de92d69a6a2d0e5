"""The Redis adapters against a real redis-server: blobs, the results stream, leases,
connections (passwords, restarts, a SIGKILLed server)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import redis

from pact_workers.agents.base import AgentOutput, AgentRequest
from pact_workers.agents.noop import NoopAgent
from pact_workers.artifacts import ArtifactStore, DirectoryBlobStore, digest_bytes
from pact_workers.errors import ArtifactError
from pact_workers.fleet import (
    BrokerAuthError,
    BrokerUnavailable,
    Leases,
    RedisBlobStore,
    ResultStream,
    heartbeat_worker,
    keys,
    live_workers,
    publish_result,
    redis_from_url,
    wait_for_redis,
)
from pact_workers.fleet.tiered import TieredBlobStore
from pact_workers.models.work import Phase, ResultMessage, TaskMessage
from pact_workers.runner import execute_task
from pact_workers.sandbox import LocalSandbox
from tests.integration.conftest import RedisServer, free_port

pytestmark = [pytest.mark.redis, pytest.mark.timeout(120)]

RUN = "a1b2c3"


@pytest.fixture
def connect() -> Iterator[Callable[..., redis.Redis]]:
    """Make clients with redis_from_url; all of them are closed at teardown."""
    clients: list[redis.Redis] = []

    def make(url: str, retry_s: float = 5.0) -> redis.Redis:
        client = redis_from_url(url, retry_s=retry_s)
        clients.append(client)
        return client

    yield make
    for client in clients:
        client.close()


@pytest.fixture
def client(redis_url: str, connect: Callable[..., redis.Redis]) -> redis.Redis:
    return connect(redis_url)


def result(component: str = "store", attempt: int = 1, **fields: object) -> ResultMessage:
    return ResultMessage.model_validate(
        {
            "run_id": RUN,
            "component_id": component,
            "phase": "implement",
            "attempt": attempt,
            "outcome": "ok",
            **fields,
        }
    )


def task(component: str = "store", attempt: int = 1, phase: Phase = Phase.IMPLEMENT) -> TaskMessage:
    return TaskMessage(run_id=RUN, component_id=component, phase=phase, attempt=attempt)


def pending_count(client: redis.Redis, stream: str, group: str = keys.RESULTS_GROUP) -> int:
    return int(client.xpending(stream, group)["pending"])


def eventually(check: Callable[[], bool], timeout_s: float) -> float:
    """Poll ``check`` until it is true; return the seconds it took."""
    start = time.monotonic()
    while not check():
        assert time.monotonic() - start < timeout_s, f"not true within {timeout_s} s"
        time.sleep(0.02)
    return time.monotonic() - start


# ------------------------------------------------------------------------------ blobs


def test_bundles_round_trip_through_redis_blobs(client: redis.Redis) -> None:
    store = ArtifactStore(RedisBlobStore(client))
    files = {
        "src/store.py": b"def get(k):\n    return k\n",
        "README": b"",
        "d/x.bin": bytes(range(256)),
    }

    digest = store.put_bundle(files)

    assert store.get_bundle(digest) == files
    assert store.put_bundle(dict(reversed(files.items()))) == digest
    assert store.blobs.has_blob(digest)
    assert client.exists(keys.artifact(digest_bytes(files["d/x.bin"])))
    # Each write keeps a blob for the artifact TTL (see test_artifact_expiry.py).
    assert 0 < client.ttl(keys.artifact(digest)) <= keys.ARTIFACT_TTL_S


def test_a_blob_over_the_size_limit_is_rejected_with_its_size_and_the_limit(
    client: redis.Redis,
) -> None:
    blobs = RedisBlobStore(client, max_blob_bytes=1000)

    with pytest.raises(ArtifactError, match=r"1001 bytes is over the limit of 1000 bytes") as err:
        blobs.put_blob(b"x" * 1001)

    assert "remove generated, binary or data files" in str(err.value)
    assert not blobs.has_blob(digest_bytes(b"x" * 1001))
    assert blobs.get_blob(blobs.put_blob(b"x" * 1000)) == b"x" * 1000


def test_a_corrupt_blob_is_detected_and_a_lost_one_is_explained(client: redis.Redis) -> None:
    blobs = RedisBlobStore(client)
    digest = blobs.put_blob(b"the real bytes")
    client.set(keys.artifact(digest), b"something else")

    with pytest.raises(ArtifactError, match=f"{digest} is corrupt"):
        blobs.get_blob(digest)

    client.delete(keys.artifact(digest))
    with pytest.raises(ArtifactError, match="noeviction") as err:
        blobs.get_blob(digest)
    assert digest in str(err.value) and "lost" in str(err.value)
    with pytest.raises(ArtifactError, match="malformed artifact digest"):
        blobs.get_blob("sha256:nothex")


def test_a_tiered_store_moves_bundles_in_one_round_trip_and_checks_what_it_reads(
    client: redis.Redis, tmp_path: Path
) -> None:
    files = {f"src/m{i}.py": f"X = {i}\n".encode() for i in range(20)}
    tiered = TieredBlobStore(DirectoryBlobStore(tmp_path / "a"), RedisBlobStore(client))
    digest = ArtifactStore(tiered).put_bundle(files)
    # Another machine, with an empty local tier, reads the whole bundle from Redis.
    elsewhere = ArtifactStore(
        TieredBlobStore(DirectoryBlobStore(tmp_path / "b"), RedisBlobStore(client))
    )
    assert elsewhere.get_bundle(digest) == files
    assert DirectoryBlobStore(tmp_path / "b").has_blob(digest_bytes(files["src/m3.py"]))
    # A blob corrupted in Redis is refused when fetched many at once, as one at a time.
    victim = digest_bytes(files["src/m7.py"])
    client.set(keys.artifact(victim), b"not it")
    third = ArtifactStore(
        TieredBlobStore(DirectoryBlobStore(tmp_path / "c"), RedisBlobStore(client))
    )
    with pytest.raises(ArtifactError, match=f"{victim} is corrupt"):
        third.get_bundle(digest)


def test_a_deferred_tiered_store_sends_what_it_wrote_at_the_sync_in_one_round_trip(
    client: redis.Redis, tmp_path: Path
) -> None:
    """A run loop's store: writes reach Redis at the sync before the commit that names
    them (one pipeline for all), are readable locally at once, and an oversized file is
    refused when it is written, not at the sync."""
    tiered = TieredBlobStore(
        DirectoryBlobStore(tmp_path / "a", deferred=True), RedisBlobStore(client), deferred=True
    )
    store = ArtifactStore(tiered)
    first = store.put_bundle({"spec.json": b"{}"})
    second = store.put_manifest({"x/interface.json": digest_bytes(b"{}")})
    assert not client.exists(keys.artifact(first)) and not client.exists(keys.artifact(second))
    assert store.get_bundle(first) == {"spec.json": b"{}"}  # the local tier has it
    sent: list[int] = []
    execute = redis.client.Pipeline.execute

    def counted(self: redis.client.Pipeline, *args: object, **kwargs: object) -> object:
        sent.append(len(self.command_stack))
        return execute(self, *args, **kwargs)

    with pytest.MonkeyPatch.context() as m:
        m.setattr(redis.client.Pipeline, "execute", counted)
        tiered.sync()
        tiered.sync()  # nothing left to send
    assert sent == [3]  # spec.json, its manifest, the second manifest: one round trip
    elsewhere = ArtifactStore(
        TieredBlobStore(DirectoryBlobStore(tmp_path / "b"), RedisBlobStore(client))
    )
    assert elsewhere.get_bundle(second) == {"x/interface.json": b"{}"}
    with pytest.raises(ArtifactError, match="over the limit"):
        TieredBlobStore(
            DirectoryBlobStore(tmp_path / "c"),
            RedisBlobStore(client, max_blob_bytes=10),
            deferred=True,
        ).put_blob(b"x" * 11)


def test_prefetching_bundles_fetches_what_the_local_tier_lacks_in_two_round_trips(
    client: redis.Redis, tmp_path: Path
) -> None:
    """The scheduler fetches the outputs of a turn's results together: every manifest
    in one MGET, every file in a second, then reads them locally."""
    workers = ArtifactStore(
        TieredBlobStore(DirectoryBlobStore(tmp_path / "w"), RedisBlobStore(client))
    )
    outputs = [workers.put_bundle({f"src/m{i}.py": f"X = {i}\n".encode()}) for i in range(5)]
    here = ArtifactStore(
        TieredBlobStore(DirectoryBlobStore(tmp_path / "s"), RedisBlobStore(client))
    )
    calls: list[int] = []
    mget = redis.Redis.mget

    def counted(self: redis.Redis, keys_: list[str], *args: str) -> object:
        calls.append(len(keys_))
        return mget(self, keys_, *args)

    with pytest.MonkeyPatch.context() as m:
        m.setattr(redis.Redis, "mget", counted)
        here.prefetch(outputs)
        assert calls == [5, 5]
        bundles = [here.get_bundle(d) for d in outputs]
        here.prefetch(outputs)  # all local now: no round trip
    assert calls == [5, 5]
    assert bundles[3] == {"src/m3.py": b"X = 3\n"}
    # A bundle Redis never had is left for the read that needs it to report.
    missing = digest_bytes(b"never stored")
    here.prefetch([missing])
    with pytest.raises(ArtifactError, match="missing from the Redis artifact store"):
        here.get_bundle(missing)


def reads_received(server: redis.Redis, since: int) -> list[str]:
    """The GETs and MGETs ``server`` received after slow-log entry ``since``, in order, as
    "GET" or "MGET <keys>" (the slow log, at a threshold of 0, records every command)."""
    entries = sorted(server.slowlog_get(1000), key=lambda e: e["id"])
    words = [e["command"].split() for e in entries if e["id"] > since]
    return [
        "GET" if w[0].upper() == b"GET" else f"MGET {len(w) - 1}"
        for w in words
        if w[0].upper() in {b"GET", b"MGET"}
    ]


def last_entry(server: redis.Redis) -> int:
    entries = server.slowlog_get(1)
    return int(entries[0]["id"]) if entries else -1


def test_an_attempt_reads_its_inputs_in_two_round_trips(
    private_redis: RedisServer, connect: Callable[..., redis.Redis]
) -> None:
    """A worker reads every bundle of an attempt, verification's inputs too, with one MGET
    of their manifests and one of their files, and the harness reuses what was read
    (it read the spec again, and each bundle took a GET and an MGET). Counted by the
    server itself, which hears no other client."""
    client = connect(private_redis.url)
    client.config_set("slowlog-log-slower-than", 0)
    client.config_set("slowlog-max-len", 1000)
    store = ArtifactStore(RedisBlobStore(client))
    spec = {"spec.json": json.dumps({"component_id": "store", "children": []}).encode()}
    inputs = {
        "spec": store.put_bundle(spec),
        "dep_contracts": store.put_bundle({"other/interface.json": b"{}"}),
        "lessons": store.put_bundle({"lessons.json": b"[]"}),
    }
    verify_inputs = {"tests": store.put_bundle({"tests/test_store.py": b"def test(): pass\n"})}
    task = TaskMessage(
        run_id=RUN,
        component_id="store",
        phase=Phase.CONTRACT,
        attempt=1,
        inputs=inputs,
        verify_inputs=verify_inputs,
    )
    agent_saw: list[dict[str, dict[str, bytes]]] = []

    class Recording(NoopAgent):
        def produce(self, request: AgentRequest) -> AgentOutput:
            agent_saw.append(dict(request.inputs))
            return super().produce(request)

    since = last_entry(client)
    outcome = execute_task(task, agent=Recording(), sandbox=LocalSandbox(), store=store)
    assert outcome.outcome == "ok", outcome.error
    assert reads_received(client, since) == ["MGET 4", "MGET 4"]
    assert agent_saw == [
        {
            "spec": spec,
            "dep_contracts": {"other/interface.json": b"{}"},
            "lessons": {"lessons.json": b"[]"},
        }
    ]
    # Bundles a worker has read before are known by their manifests: one MGET.
    since = last_entry(client)
    assert store.get_bundles([inputs["spec"], inputs["lessons"]]) == {
        inputs["spec"]: spec,
        inputs["lessons"]: {"lessons.json": b"[]"},
    }
    assert reads_received(client, since) == ["MGET 2"]
    # A bundle that is not there fails the read, naming it.
    missing = digest_bytes(b"never stored")
    with pytest.raises(ArtifactError, match=f"{missing} is missing"):
        store.get_bundles([inputs["spec"], missing])


# ---------------------------------------------------------------------------- results


def test_results_are_published_read_and_acknowledged(client: redis.Redis) -> None:
    stream = ResultStream(client, keys.RESULTS_STREAM)
    stream.ensure_group()
    stream.ensure_group()  # idempotent
    sent = [result(c) for c in ("a", "b", "c")]
    ids = [publish_result(client, keys.RESULTS_STREAM, r) for r in sent]

    got = stream.read(block_ms=100)

    assert [d.entry_id for d in got] == ids
    assert [d.result for d in got] == sent
    assert pending_count(client, keys.RESULTS_STREAM) == 3
    stream.ack([d.entry_id for d in got])
    assert pending_count(client, keys.RESULTS_STREAM) == 0
    assert stream.read(block_ms=50) == []


def test_a_blocking_read_returns_a_result_published_while_it_waits(client: redis.Redis) -> None:
    stream = ResultStream(client, keys.run_results(RUN))
    stream.ensure_group()
    assert stream.read(block_ms=10) == []  # past the recovery passes: now blocking on new
    timer = threading.Timer(0.3, publish_result, (client, keys.run_results(RUN), result()))
    timer.start()
    try:
        start = time.monotonic()
        got = stream.read(block_ms=5_000)
        assert [d.result for d in got] == [result()]
        assert time.monotonic() - start < 4
    finally:
        timer.join()


def test_a_restarted_scheduler_gets_its_unacknowledged_results_first(client: redis.Redis) -> None:
    first = ResultStream(client, keys.RESULTS_STREAM)
    first.ensure_group()
    ids = [publish_result(client, keys.RESULTS_STREAM, result(c)) for c in ("a", "b", "c")]
    assert [d.entry_id for d in first.read(block_ms=50)] == ids
    first.ack([ids[0]])
    newer = publish_result(client, keys.RESULTS_STREAM, result("d"))

    # The scheduler dies; its successor uses the same consumer name.
    second = ResultStream(client, keys.RESULTS_STREAM)
    backlog = second.read(block_ms=50, count=1)
    backlog += second.read(block_ms=50, count=1)
    fresh = second.read(block_ms=50)

    assert [d.entry_id for d in backlog] == ids[1:]
    assert [d.entry_id for d in fresh] == [newer]
    second.ack([*ids[1:], newer])
    third = ResultStream(client, keys.RESULTS_STREAM)
    assert third.read(block_ms=50) == []  # acknowledged results never come back
    assert pending_count(client, keys.RESULTS_STREAM) == 0


def test_results_pending_with_a_dead_consumer_are_claimed(client: redis.Redis) -> None:
    dead = ResultStream(client, keys.RESULTS_STREAM, consumer="scheduler-old")
    dead.ensure_group()
    ids = [publish_result(client, keys.RESULTS_STREAM, result(c)) for c in ("a", "b")]
    assert len(dead.read(block_ms=50)) == 2  # delivered, never acknowledged: it died
    live = ResultStream(client, keys.RESULTS_STREAM, consumer="scheduler", claim_idle_ms=200)

    assert live.read(block_ms=10) == []  # not idle long enough yet
    time.sleep(0.3)
    claimed = live.read(block_ms=10)

    assert [d.entry_id for d in claimed] == ids
    owners = client.xpending_range(keys.RESULTS_STREAM, keys.RESULTS_GROUP, "-", "+", 10)
    assert {o["consumer"] for o in owners} == {b"scheduler"}
    # Claimed entries the caller holds are not handed to it again by later claim passes.
    time.sleep(0.3)
    assert live.read(block_ms=10) == []
    live.ack(ids)
    assert pending_count(client, keys.RESULTS_STREAM) == 0


def test_a_malformed_entry_is_skipped_acknowledged_and_counted(client: redis.Redis) -> None:
    stream = ResultStream(client, keys.RESULTS_STREAM)
    stream.ensure_group()
    client.xadd(keys.RESULTS_STREAM, {"result": b"not json"})
    client.xadd(keys.RESULTS_STREAM, {"something": b"else"})
    client.xadd(keys.RESULTS_STREAM, {"result": b'{"run_id": "r", "attempt": 0}'})
    good = publish_result(client, keys.RESULTS_STREAM, result())

    got = stream.read(block_ms=50)

    assert [d.entry_id for d in got] == [good]
    assert stream.malformed == 3
    assert pending_count(client, keys.RESULTS_STREAM) == 1  # only the good one


def test_a_consumer_group_redis_lost_is_recreated(client: redis.Redis) -> None:
    stream = ResultStream(client, keys.RESULTS_STREAM)
    stream.ensure_group()
    assert stream.read(block_ms=10) == []
    client.xgroup_destroy(keys.RESULTS_STREAM, keys.RESULTS_GROUP)
    entry = publish_result(client, keys.RESULTS_STREAM, result())

    got = stream.read(block_ms=50)

    assert [d.entry_id for d in got] == [entry]
    stream.ack([entry])
    assert pending_count(client, keys.RESULTS_STREAM) == 0


# ----------------------------------------------------------------------------- leases


def test_a_held_lease_outlives_its_ttl_and_expires_after_its_holder_dies(
    client: redis.Redis,
) -> None:
    leases = Leases(client, ttl_s=0.6)
    t = task()
    key = keys.lease(t.run_id, t.component_id, t.phase, t.attempt)
    leases.dispatch(t)
    assert client.get(key) == b"queued"
    assert client.pttl(key) > 3600_000

    hold = leases.hold(t, "worker-1")
    with hold:
        assert client.get(key) == b"running:worker-1"
        time.sleep(1.5)  # 2.5 TTLs
        assert client.get(key) == b"running:worker-1"
        assert 0 < client.pttl(key) <= 600
        assert leases.alive([(RUN, "store", "implement", 1)]) == {
            (RUN, "store", "implement", 1): True
        }
        hold._crash()  # the worker is SIGKILLed: no more renewals, no cleanup
        took_s = eventually(lambda: not client.exists(key), timeout_s=2.0)
    assert took_s <= 0.6 + 0.2
    assert leases.alive([(RUN, "store", "implement", 1)]) == {(RUN, "store", "implement", 1): False}


def test_a_lease_is_deleted_when_its_block_ends_even_on_an_error(client: redis.Redis) -> None:
    leases = Leases(client, ttl_s=5)
    t = task()
    key = keys.lease(t.run_id, t.component_id, t.phase, t.attempt)
    leases.dispatch(t)

    with pytest.raises(RuntimeError), leases.hold(t, "w"):
        raise RuntimeError("the agent failed")

    assert not client.exists(key)
    assert leases.keeper.kept() == 0  # nothing renews it again


def test_a_running_lease_redis_lost_is_taken_again_unless_superseded(client: redis.Redis) -> None:
    leases = Leases(client, ttl_s=0.3)
    t1, t2 = task(attempt=1), task(attempt=2)
    key1 = keys.lease(RUN, "store", "implement", 1)
    leases.dispatch(t1)
    with leases.hold(t1, "w"):
        client.delete(key1)  # lost (e.g. a restart without persistence)
        eventually(lambda: client.get(key1) == b"running:w", timeout_s=2.0)
        leases.dispatch(t2)  # the scheduler moves on to attempt 2
        client.delete(key1)
        time.sleep(0.5)
        assert not client.exists(key1)  # a superseded attempt's lease stays gone


def test_only_the_current_attempt_passes_the_fence(client: redis.Redis) -> None:
    leases = Leases(client)
    t1, t2, other = task(attempt=1), task(attempt=2), task("api")

    assert leases.is_current(t1)  # no key: current (never drop work over a lost key)
    leases.dispatch(t1)
    assert leases.is_current(t1)
    leases.dispatch(t2)
    assert not leases.is_current(t1)
    assert leases.is_current(t2)
    assert leases.is_current(other)
    assert 0 < client.ttl(keys.current_attempt(RUN, "store", "implement")) <= 7 * 24 * 3600

    leases.forget(t2)
    assert leases.alive([(RUN, "store", "implement", 1), (RUN, "store", "implement", 2)]) == {
        (RUN, "store", "implement", 1): True,
        (RUN, "store", "implement", 2): False,
    }
    client.delete(keys.current_attempt(RUN, "store", "implement"))
    assert leases.is_current(t1) and leases.is_current(t2)


def test_only_the_first_result_of_an_attempt_is_marked_done(client: redis.Redis) -> None:
    leases = Leases(client)

    assert leases.mark_done(task(attempt=1))
    assert not leases.mark_done(task(attempt=1))
    assert not leases.mark_done(result(attempt=1))  # a ResultMessage names it too
    assert leases.mark_done(task(attempt=2))
    assert leases.alive([]) == {}


def test_worker_heartbeats_expire(client: redis.Redis) -> None:
    heartbeat_worker(client, "celery@a", {"roles": ["code_author"], "pid": 1}, ttl_s=0.3)
    heartbeat_worker(client, "celery@b", {"roles": ["test_author"], "pid": 2}, ttl_s=30)

    workers = live_workers(client)
    assert set(workers) == {"celery@a", "celery@b"}
    assert workers["celery@a"]["roles"] == ["code_author"]
    eventually(lambda: set(live_workers(client)) == {"celery@b"}, timeout_s=2.0)


# ------------------------------------------------------------------------ connections


def test_a_unix_socket_url_works(
    redis_server: RedisServer, redis_url: str, connect: Callable[..., redis.Redis]
) -> None:
    if not redis_server.unix_socket.exists():
        pytest.skip("the server's directory path is too long for a unix socket")
    tcp = connect(redis_url)
    tcp.set("pact:test", b"via tcp")

    unix = connect(f"unix://{redis_server.unix_socket}?db=0")

    assert unix.get("pact:test") == b"via tcp"


def test_a_password_in_the_url_is_used_and_a_wrong_one_is_a_clear_error(
    start_redis: Callable[..., RedisServer], connect: Callable[..., redis.Redis]
) -> None:
    server = start_redis(password="s3cret-pw")
    good = connect(f"redis://:s3cret-pw@127.0.0.1:{server.port}/0")
    wait_for_redis(good, timeout_s=5)
    assert RedisBlobStore(good).has_blob(RedisBlobStore(good).put_blob(b"authenticated"))

    start = time.monotonic()
    with pytest.raises(BrokerAuthError) as err:
        wait_for_redis(connect(f"redis://:wrong-pw@127.0.0.1:{server.port}/0"), 10)
    assert time.monotonic() - start < 2, "a wrong password must not be retried"
    message = str(err.value)
    assert f"127.0.0.1:{server.port}" in message and "password" in message
    assert "wrong-pw" not in message

    with pytest.raises(BrokerAuthError):
        wait_for_redis(connect(f"redis://127.0.0.1:{server.port}/0"), 10)  # none given


def test_waiting_for_a_redis_that_is_not_there_fails_in_time(
    connect: Callable[..., redis.Redis],
) -> None:
    port = free_port()
    client = connect(f"redis://:pw@127.0.0.1:{port}/0", retry_s=30)

    start = time.monotonic()
    with pytest.raises(BrokerUnavailable, match=f"127.0.0.1:{port}.*did not answer within 0.5 s"):
        wait_for_redis(client, timeout_s=0.5)

    assert time.monotonic() - start < 2


def test_a_client_rides_out_a_redis_restart_and_the_data_survives(
    private_redis: RedisServer, connect: Callable[..., redis.Redis]
) -> None:
    client = connect(private_redis.url, retry_s=20)
    blobs = RedisBlobStore(client)
    digest = blobs.put_blob(b"survives restarts")
    stream = ResultStream(client, keys.RESULTS_STREAM)
    stream.ensure_group()
    entry = publish_result(client, keys.RESULTS_STREAM, result())
    assert [d.entry_id for d in stream.read(block_ms=50)] == [entry]  # delivered, not acked

    private_redis.restart()

    assert blobs.get_blob(digest) == b"survives restarts"
    after = ResultStream(client, keys.RESULTS_STREAM)
    assert [d.entry_id for d in after.read(block_ms=50)] == [entry]


def test_a_call_made_while_redis_is_down_succeeds_once_it_is_back(
    private_redis: RedisServer, connect: Callable[..., redis.Redis]
) -> None:
    client = connect(private_redis.url, retry_s=20)
    digest = RedisBlobStore(client).put_blob(b"written before the crash")
    stream = ResultStream(client, keys.RESULTS_STREAM)
    stream.ensure_group()
    entry = publish_result(client, keys.RESULTS_STREAM, result())

    private_redis.kill()  # SIGKILL: only what the AOF fsynced survives
    with ThreadPoolExecutor(1) as pool:
        start = time.monotonic()
        # The server is down while this call starts; it must wait for it, not fail.
        call = pool.submit(publish_result, client, keys.RESULTS_STREAM, result("api"))
        time.sleep(1.0)
        assert not call.done()
        private_redis.start()
        later = call.result(timeout=20)
        waited_s = time.monotonic() - start

    assert 1.0 <= waited_s < 20
    assert RedisBlobStore(client).get_blob(digest) == b"written before the crash"
    assert [d.entry_id for d in stream.read(block_ms=50)] == [entry, later]
