"""Held leases on a real Redis, renewed by their process's one keeper thread."""

from __future__ import annotations

import os
import signal
import time
import warnings
from collections.abc import Iterator

import pytest
import redis

from pact_workers.fleet import Leases, keys, redis_from_url
from pact_workers.fleet.keeper import STAGE_DELAY_S
from pact_workers.models.work import Phase, TaskMessage
from tests.integration.test_redis_adapters import eventually

pytestmark = [pytest.mark.redis, pytest.mark.timeout(60)]


@pytest.fixture
def client(redis_url: str) -> Iterator[redis.Redis]:
    client = redis_from_url(redis_url, retry_s=5.0)
    yield client
    client.close()


def task(run_id: str, component: str = "store") -> TaskMessage:
    return TaskMessage(run_id=run_id, component_id=component, phase=Phase.IMPLEMENT, attempt=1)


def lease_key(t: TaskMessage) -> str:
    return keys.lease(t.run_id, t.component_id, t.phase, t.attempt)


def test_many_held_leases_outlive_their_ttl_on_one_thread(client: redis.Redis) -> None:
    leases = Leases(client, ttl_s=0.3)
    tasks = [task("keep1", f"c{i}") for i in range(6)]
    holds = [leases.hold(t, "w") for t in tasks]
    for hold in holds:
        hold.__enter__()
    try:
        time.sleep(1.2)  # four TTLs
        assert [client.get(lease_key(t)) for t in tasks] == [b"running:w"] * 6
        assert leases.keeper.kept() == 6
    finally:
        for hold in holds:
            hold.__exit__(None, None, None)
    assert not any(client.exists(lease_key(t)) for t in tasks)
    assert leases.keeper.kept() == 0


def test_the_verify_stage_reaches_the_lease_within_the_stage_delay(client: redis.Redis) -> None:
    leases = Leases(client, ttl_s=30.0)  # renewals every 10 s: only the stage writes
    t = task("keep2")
    hold = leases.hold(t, "w")
    with hold:
        assert client.get(lease_key(t)) == b"running:w"
        hold.stage("verify")
        took = eventually(lambda: client.get(lease_key(t)) == b"running:w;verify", 5.0)
        assert client.pttl(lease_key(t)) > 25_000  # written with a fresh TTL
    assert took <= STAGE_DELAY_S + 0.5


def test_a_lease_deleted_on_exit_stays_deleted_though_its_stage_was_pending(
    client: redis.Redis,
) -> None:
    leases = Leases(client, ttl_s=0.3)
    t = task("keep3")
    hold = leases.hold(t, "w")
    with hold:
        hold.stage("verify")  # due within the stage delay; the block ends first
    assert not client.exists(lease_key(t))

    time.sleep(2 * STAGE_DELAY_S + 0.3)  # a due renewal would have taken it again

    assert not client.exists(lease_key(t))
    assert leases.keeper.kept() == 0


def test_a_forked_child_renews_its_leases_with_a_keeper_of_its_own(
    client: redis.Redis,
) -> None:
    leases = Leases(client, ttl_s=0.3)
    with leases.hold(task("keep4", "parent"), "w"):
        # The parent's keeper thread runs; a fork copies the keeper, not the thread.
        child_task = task("keep4", "child")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # fork with threads
            pid = os.fork()
        if pid == 0:  # pragma: no cover - the child reports through its exit code
            code = 1
            try:
                with leases.hold(child_task, "child"):
                    time.sleep(1.2)  # four TTLs
                    code = 0 if client.get(lease_key(child_task)) == b"running:child" else 3
            finally:
                os._exit(code)
        code = _exit_code(pid, timeout_s=10.0)
    assert code == 0, "the child's lease expired" if code == 3 else f"the child ended with {code}"


def _exit_code(pid: int, timeout_s: float) -> int | str:
    """The exit code of the child ``pid``; it is killed if it has not ended in time."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        time.sleep(0.05)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    return f"no exit within {timeout_s} s (hung: killed)"
