"""A fleet worker's attempt that ``pact cancel`` supersedes while its command runs in a
Docker sandbox: the lease's renewal sees the item's current attempt moved past it (what
``CeleryExecutor.revoke`` writes), the container is killed and removed within seconds,
and the lease is gone (real Redis, real Docker engine)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from pact_workers.fleet import keys
from pact_workers.fleet.leases import Leases
from pact_workers.sandbox.base import SandboxRequest
from pact_workers.sandbox.cancel import SandboxCancelled, cancellable
from pact_workers.sandbox.containers import LABEL_RUN
from pact_workers.sandbox.docker import DockerSandbox
from tests.conftest import DOCKER_GROUP
from tests.integration.test_fleet_faults import redis_client
from tests.integration.test_sandbox_contract import DOCKER_ENV, docker_sandbox

pytestmark = [pytest.mark.docker, DOCKER_GROUP]

#: A short lease: renewed (and the current attempt asked) every LEASE_TTL_S / 3.
LEASE_TTL_S = 1.5
#: How soon after the cancel the container must be gone.
GONE_WITHIN_S = 10.0
RUN_ID = "run-cancel-sandbox"


@dataclass(frozen=True)
class Attempt:
    run_id: str
    component_id: str
    phase: str
    attempt: int


@pytest.fixture(scope="module")
def engine() -> Iterator[tuple[Any, DockerSandbox]]:
    with docker_sandbox() as pair:
        yield pair


def containers_of_the_run(client: Any) -> list[Any]:
    found: list[Any] = client.containers.list(all=True, filters={"label": f"{LABEL_RUN}={RUN_ID}"})
    return found


def test_a_cancelled_attempt_s_container_is_gone_within_seconds(
    engine: tuple[Any, DockerSandbox], redis_url: str
) -> None:
    client, sandbox = engine
    task = Attempt(RUN_ID, "calc", "implement", 1)
    environment = DOCKER_ENV.model_copy(update={"env_vars": {"PACT_RUN_ID": RUN_ID}})
    request = SandboxRequest(
        command=["{python}", "-c", "import time; time.sleep(300)"],
        environment=environment,
        timeout_s=300,
    )
    outcome: dict[str, BaseException] = {}
    with redis_client(redis_url) as redis:
        leases = Leases(redis, ttl_s=LEASE_TTL_S)
        leases.dispatch(task)
        hold = leases.hold(task, "worker-1")

        def attempt() -> None:
            # What a worker's run_attempt does around the agent and the harness.
            with hold, cancellable(hold.cancelled):
                try:
                    sandbox.run(request)
                except BaseException as exc:
                    outcome["raised"] = exc

        worker = threading.Thread(target=attempt, daemon=True)
        worker.start()
        deadline = time.monotonic() + 120
        while not [c for c in containers_of_the_run(client) if c.status == "running"]:
            assert worker.is_alive() and time.monotonic() < deadline, outcome
            time.sleep(0.2)

        # pact cancel: the scheduler moves the item's current attempt past this one.
        redis.set(keys.current_attempt(RUN_ID, "calc", "implement"), "2")
        cancelled_at = time.monotonic()
        worker.join(GONE_WITHIN_S)
        assert not worker.is_alive(), "the cancelled attempt still runs"
        assert isinstance(outcome.get("raised"), SandboxCancelled), outcome
        assert containers_of_the_run(client) == []
        assert time.monotonic() - cancelled_at < GONE_WITHIN_S
        assert hold.cancelled.is_set()
        assert redis.get(keys.lease(RUN_ID, "calc", "implement", 1)) is None


def test_an_attempt_that_stays_current_keeps_its_container_to_the_end(
    engine: tuple[Any, DockerSandbox], redis_url: str
) -> None:
    _, sandbox = engine
    task = Attempt(RUN_ID, "calc", "implement", 1)
    request = SandboxRequest(
        command=["{python}", "-c", "import time; time.sleep(2 * 1.5); print('done')"],
        environment=DOCKER_ENV,
    )
    with redis_client(redis_url) as redis:
        leases = Leases(redis, ttl_s=LEASE_TTL_S)
        leases.dispatch(task)
        hold = leases.hold(task, "worker-1")
        with hold, cancellable(hold.cancelled):
            result = sandbox.run(request)
    assert result.exit_code == 0 and result.stdout.strip() == "done"
    assert not hold.cancelled.is_set()
