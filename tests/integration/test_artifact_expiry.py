"""Artifact blobs expire from the fleet's Redis, and a run survives it.

Redis carries a run's files between machines; the run's own durable copy is its
project's ``.pact/artifacts``. Every blob written to Redis expires
``PACT_ARTIFACT_TTL_S`` after its last write, so a fleet's Redis holds what recent
runs use instead of every file any run ever made. These tests run real ``pact
worker`` and ``pact run``/``pact resume`` processes against a real ``redis-server``.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest
import redis

from pact_workers.fleet import keys
from pact_workers.models.work import Phase
from scheduler.events import ItemFailed
from scheduler.outcomes import OUTPUT_LOST
from tests.integration.conftest import RedisServer
from tests.integration.fleet import Fleet, pact_argv
from tests.integration.test_fleet_faults import (
    AUTHOR_ROLES,
    CODE_ROLES,
    redis_client,
    resume_to_completion,
    run_args,
    running_attempts,
    slow_implementations,
    succeeded,
    wait_for,
    wait_for_run_id,
)

#: The artifact TTL the fleet of these tests runs with.
TTL_S = 3600
#: The example's attempts whose replayed answer fails (its replay.yaml).
REPLAYED_FAILURES = {("evaluator", Phase.IMPLEMENT, 1), ("tokens", Phase.TEST, 1)}


def artifact_ttls(client: redis.Redis) -> dict[str, int]:
    """Every artifact blob in Redis -> its remaining seconds (-1: it never expires)."""
    return {key.decode(): client.ttl(key) for key in client.scan_iter(match="pact:artifact:*")}


def waiting_successes(
    client: redis.Redis, run_id: str
) -> tuple[set[tuple[str, str, int]], set[tuple[str, str, int]]]:
    """(component, phase, attempt) of the successes on the run's result stream that its
    scheduler has not acknowledged: (those it never read, those it read). A scheduler
    applies a result and acknowledges it after its next commit, so one it read may be
    applied already, or its output fetched."""
    stream = keys.run_results(run_id)
    group = next(g for g in client.xinfo_groups(stream) if _text(g["name"]) == keys.RESULTS_GROUP)
    last = _entry_id(group["last-delivered-id"])
    pending = {
        _entry_id(entry["message_id"])
        for entry in client.xpending_range(stream, keys.RESULTS_GROUP, "-", "+", 10_000)
    }
    unread, read = set(), set()
    for entry_id, fields in client.xrange(stream):
        read_already = _entry_id(entry_id) <= last
        if read_already and _entry_id(entry_id) not in pending:
            continue  # read and acknowledged
        result = json.loads(fields[b"result"])
        if result["outcome"] == "ok":
            attempt = (result["component_id"], result["phase"], result["attempt"])
            (read if read_already else unread).add(attempt)
    return unread, read


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _entry_id(value: object) -> tuple[int, int]:
    ms, _, seq = _text(value).partition("-")
    return int(ms), int(seq or 0)


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_a_run_whose_artifacts_expired_while_no_scheduler_drove_it_resumes_and_completes(
    redis_url: str, example: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PACT_ARTIFACT_TTL_S", str(TTL_S))
    project = tmp_path / "project"
    with Fleet(redis_url, tmp_path / "logs") as fleet, redis_client(redis_url) as client:
        fleet.worker("authors", roles=AUTHOR_ROLES, concurrency=2)
        fleet.worker("coders", roles=CODE_ROLES, concurrency=2)
        # Implementations take a second: the run still goes on when 5 items are done.
        replay = slow_implementations(example, tmp_path)
        run = fleet.pact(*run_args(example, project, redis_url, replay=replay), name="run")
        run_id = wait_for_run_id(project, fleet=fleet, run=run)
        wait_for("5 items to succeed", lambda: succeeded(project) >= 5, fleet=fleet, run=run)
        # The scheduler dies while an attempt runs that will succeed: its result waits
        # in the stream, and the files it names wait in Redis.
        wait_for(
            "an attempt that succeeds to run",
            lambda: bool(set(running_attempts(client, run_id, list(Phase))) - REPLAYED_FAILURES),
            fleet=fleet,
            run=run,
        )
        run.lose()
        unread: set[tuple[str, str, int]] = set()

        def some_unread() -> bool:
            unread.update(waiting_successes(client, run_id)[0])
            return bool(unread)

        # That attempt's success, which no scheduler read (nor fetched its files).
        wait_for("a success nobody read in the stream", some_unread, fleet=fleet, timeout_s=30)
        time.sleep(1.0)  # and the others still running
        unread, read = waiting_successes(client, run_id)

        # What the scheduler and the workers wrote to Redis expires within the TTL.
        ttls = artifact_ttls(client)
        assert ttls, "the run wrote no artifact to Redis"
        forever = sorted(k for k, t in ttls.items() if not 0 < t <= TTL_S)
        assert not forever, f"{len(forever)} of {len(ttls)} blobs outlive the TTL: {forever[:3]}"

        # A week goes by: every blob has expired, the waiting results' outputs too.
        client.delete(*ttls)
        events = resume_to_completion(fleet, project, redis_url, client)
        # Each waiting success whose output was gone failed as transient and ran again;
        # none of them crashed the scheduler or was promoted from files it never read.
        lost = {
            (e.component_id, e.phase.value, e.attempt): e
            for e in events
            if isinstance(e, ItemFailed) and e.error_type == OUTPUT_LOST
        }
        assert unread <= set(lost), f"{sorted(unread - set(lost))} were applied without files"
        # One the dead scheduler read may have been applied, or its files fetched.
        waiting = unread | read
        assert set(lost) <= waiting, f"{sorted(set(lost) - waiting)} did not wait in the stream"
        for failure in lost.values():
            assert failure.error_class.value == "transient", failure
            assert failure.decision == "retry", failure
        # The resumed run sent again, from the project's copy, what its dispatches needed:
        # every blob in Redis now is one of this resume's writes, with a TTL again.
        after = artifact_ttls(client)
        assert after and all(0 < t <= TTL_S for t in after.values())
        print(
            f"\n{len(ttls)} blobs expired with {len(waiting)} successes waiting "
            f"({len(unread)} unread); "
            f"{len(lost)} ran again ({OUTPUT_LOST}); {len(after)} blobs written by the resume"
        )


def test_doctor_says_how_long_artifacts_stay_and_refuses_a_redis_that_evicts(
    private_redis: RedisServer, tmp_path: Path
) -> None:
    def doctor() -> str:
        env = {**os.environ, "PACT_ARTIFACT_TTL_S": "3600", "COLUMNS": "400", "NO_COLOR": "1"}
        argv = pact_argv("doctor", str(tmp_path), "--broker", private_redis.url)
        done = subprocess.run(argv, capture_output=True, text=True, timeout=60, env=env)
        return next(line for line in done.stdout.splitlines() if "Redis keeps" in line)

    line = doctor()  # the test server: noeviction, appendonly yes
    assert line.split()[0] == "ok", line
    assert "artifacts expire 1 hour after their last write" in line, line
    with redis_client(private_redis.url) as client:
        client.config_set("maxmemory-policy", "allkeys-lru")
        line = doctor()
        assert line.split()[0] == "MISSING", line
        assert "maxmemory-policy is allkeys-lru" in line and "noeviction" in line, line
        client.config_set("maxmemory-policy", "noeviction")
        client.config_set("appendonly", "no")
        line = doctor()
        assert line.split()[0] == "warn" and "--appendonly yes" in line, line
