"""What anyone who can write to the fleet's Redis can leave there, against a real
scheduler service and worker on a real redis-server: a submission that would create
its run outside the runs directory or crash the service, a result for an item the run
has not got, a cancel key of the wrong type, lease keys of the wrong type. Each is
refused where it is read; the service keeps driving its runs, and a good run
submitted alongside completes, each of its results applied once."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import redis

from pact_workers.fleet import keys
from pact_workers.fleet.results import ResultStream, ResultStreams
from scheduler.ownership import LeaseLost, RunLeases
from scheduler.registry import Submission, SubmissionQueue
from tests.integration.fleet import Fleet
from tests.integration.test_service import ALL_ROLES, check_applied_once, wait_for
from tests.unit.test_wire_entries import submission

RUN_TIMEOUT_S = 120


def submit(client: redis.Redis, example: Path, run_id: str, **fields: object) -> None:
    """Queue the example tree as ``pact submit`` would, with ``fields`` written over."""
    sub = Submission(
        run_id="placeholder",
        name="tree.json",
        tree_text=(example / "tree.json").read_text(),
        agent_options={"replay_dir": str(example / "replay")},
        submitted_at="2026-01-01T00:00:00+00:00",
    )
    doc = {**sub.model_dump(), "run_id": run_id, **fields}
    client.hset(keys.RUNS, run_id, json.dumps({"run_id": run_id, "name": "t", "state": "queued"}))
    client.xadd(keys.SUBMISSIONS, {"submission": json.dumps(doc)})


@pytest.mark.slow
def test_the_service_drops_poison_submissions_and_results_and_completes_a_good_run(
    redis_url: str, example: Path, tmp_path: Path
) -> None:
    client = redis.Redis.from_url(redis_url)
    runs_dir = tmp_path / "runs"
    with Fleet(redis_url, tmp_path / "logs") as fleet:
        fleet.worker("w", roles=ALL_ROLES, concurrency=4)
        service = fleet.pact("scheduler", "--broker", redis_url, "--runs-dir", str(runs_dir))
        # A run directory outside the runs directory, and a tree file the service
        # cannot write (it crashed, and crashed again each time the entry was claimed).
        submit(client, example, "../escaped")
        submit(client, example, "aa02", tree_suffix="/../../x.json")
        submit(client, example, "aa03", tree_suffix=".js\x00on")
        submit(client, example, "good1")
        stream = keys.run_results("good1")
        deadline = time.monotonic() + RUN_TIMEOUT_S
        while not client.exists(stream) and time.monotonic() < deadline:
            time.sleep(0.05)
        # A result for a component the run has not got (the service crashed on it, and
        # every next owner with it), and a cancel request that is no string.
        unknown = {
            "run_id": "good1",
            "component_id": "nosuch",
            "phase": "contract",
            "attempt": 1,
            "outcome": "ok",
        }
        client.xadd(stream, {"result": json.dumps(unknown)})
        client.rpush(keys.cancel_request("good1"), "not a request")
        [entry] = wait_for(redis_url, {"good1"}, fleet)
        assert entry["state"] == "completed"
        assert service.running(), fleet.logs()
    check_applied_once(runs_dir / "good1")
    assert not (tmp_path / "escaped").exists()
    assert sorted(p.name for p in runs_dir.iterdir()) == ["good1"]
    assert client.xpending(keys.SUBMISSIONS, keys.SUBMISSIONS_GROUP)["pending"] == 0
    assert client.xpending(stream, keys.RESULTS_GROUP)["pending"] == 0
    assert not client.exists(keys.cancel_request("good1"))


def test_a_lease_key_of_the_wrong_type_is_no_lease(redis_url: str) -> None:
    client = redis.Redis.from_url(redis_url)
    leases = RunLeases(client, "s1", ttl_s=10)
    token = leases.acquire("r1")
    assert token is not None
    client.delete(keys.owner("r1"))
    client.rpush(keys.owner("r1"), "garbage")
    # The holder finds its lease gone (it stops writing the run), never stuck on it.
    assert leases.renew({"r1": token}) == {"r1"}
    with pytest.raises(LeaseLost):
        leases.check("r1", token)
    leases.release("r1", token)
    # The run is an orphan; the next acquisition replaces the key with a lease.
    client.sadd(keys.ACTIVE_RUNS, "r1", "../x", "a:b", "")
    assert leases.orphans() == ["r1"]
    assert client.smembers(keys.ACTIVE_RUNS) == {b"r1"}
    again = leases.acquire("r1")
    assert again is not None and again > token
    leases.check("r1", again)


def test_a_fence_hash_of_the_wrong_type_stops_new_leases_and_says_so_without_losing_it(
    redis_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Every lease's token comes from ``pact:runs:fence``. Deleting a fence that is not a
    hash would start tokens at 1 again, below the ones in flight, so it is left for an
    operator: no lease is given meanwhile (the loop goes on with the runs it has; it used
    to fail on WRONGTYPE at every turn), and the error names the key and what to do."""
    client = redis.Redis.from_url(redis_url)
    leases = RunLeases(client, "s1", ttl_s=10)
    first = leases.acquire("r1")
    assert first is not None
    client.delete(keys.RUN_FENCES)
    client.set(keys.RUN_FENCES, "garbage")
    with caplog.at_level("ERROR"):
        assert leases.acquire("r2") is None
    [record] = [r for r in caplog.records if keys.RUN_FENCES in r.getMessage()]
    assert "not a hash" in record.getMessage() and "no run can be taken" in record.getMessage()
    assert client.get(keys.RUN_FENCES) == b"garbage"  # kept for the operator
    assert not client.exists(keys.owner("r2"))
    client.delete(keys.RUN_FENCES)
    client.hset(keys.RUN_FENCES, "r1", first)  # restored
    again = leases.acquire("r2")
    assert again is not None


def result_entry(component_id: str) -> dict[str, str]:
    doc = {
        "run_id": "r1",
        "component_id": component_id,
        "phase": "contract",
        "attempt": 1,
        "outcome": "error",
    }
    return {"result": json.dumps(doc)}


def test_a_submissions_key_that_is_no_stream_is_replaced_and_the_queue_goes_on(
    redis_url: str, example: Path
) -> None:
    """A key of another type by the stream's name failed every read with WRONGTYPE, and
    the service tried again for ever; it holds no submissions, so it is replaced."""
    client = redis.Redis.from_url(redis_url)
    client.set(keys.SUBMISSIONS, "not a stream")
    queue = SubmissionQueue(client, "s1", claim_idle_s=10)  # starting with it there
    assert queue.take(10) == []
    client.delete(keys.SUBMISSIONS)
    client.rpush(keys.SUBMISSIONS, "not a stream either")  # while the service runs
    assert queue.take(10) == []
    client.xadd(keys.SUBMISSIONS, submission(example, run_id="good1"))
    [(entry_id, sub)] = queue.take(10)
    assert sub is not None and sub.run_id == "good1"
    queue.ack(entry_id)
    client.delete(keys.SUBMISSIONS)  # the stream and its group gone (a Redis restarted bare)
    assert queue.take(10) == []
    client.xadd(keys.SUBMISSIONS, submission(example, run_id="good2"))
    [(_, sub)] = queue.take(10)
    assert sub is not None and sub.run_id == "good2"


def test_a_results_key_that_is_no_stream_is_replaced_and_reading_goes_on(
    redis_url: str,
) -> None:
    client = redis.Redis.from_url(redis_url)
    one = ResultStream(client, keys.run_results("r1"))
    client.set(keys.run_results("r1"), "not a stream")
    one.ensure_group()
    assert one.read(block_ms=0) == []
    client.delete(keys.run_results("r1"))
    client.set(keys.run_results("r1"), "not a stream")
    assert one.read(block_ms=0) == []  # replaced while reading
    client.xadd(keys.run_results("r1"), result_entry("a"))
    assert [d.result.component_id for d in one.read(block_ms=0)] == ["a"]

    many = ResultStreams(client)
    many.attach(keys.run_results("r2"))
    assert many.read(block_ms=0) == []  # the backlog is read; new entries next
    client.delete(keys.run_results("r2"))
    client.hset(keys.run_results("r2"), "x", "y")
    assert many.read(block_ms=0) == []
    client.xadd(keys.run_results("r2"), {"result": result_entry("b")["result"].replace("r1", "r2")})
    assert [d.result.component_id for d in many.read(block_ms=0)] == ["b"]


def test_a_result_is_not_marked_done_when_its_stream_is_no_stream(redis_url: str) -> None:
    """A worker publishes with one script: the done marker, the stream entry, the lease's
    deletion. A results key of another type failed the script after the marker was set
    (a script's writes stay), so the attempt was neither lost (it has a marker) nor
    finished (no result) until its role's timeout; now nothing is written, the lease
    expires, and the attempt is dispatched again at once."""
    from pact_workers.fleet.leases import Leases
    from pact_workers.models.work import Phase, TaskMessage

    client = redis.Redis.from_url(redis_url)
    task = TaskMessage(run_id="r1", component_id="c", phase=Phase.CONTRACT, attempt=1)
    leases = Leases(client, ttl_s=60)
    leases.dispatch(task)
    assert leases.claim(task, "w1")
    client.set(keys.run_results("r1"), "not a stream")
    with pytest.raises(redis.ResponseError, match="WRONGTYPE"):
        leases.finish(task, keys.run_results("r1"), b"{}")
    assert not client.exists(keys.done("r1", "c", "contract", 1))
    client.delete(keys.run_results("r1"))
    assert leases.finish(task, keys.run_results("r1"), b"{}")  # once the key is a stream
    assert client.exists(keys.done("r1", "c", "contract", 1))
