"""Workers that lose Redis: nothing fails for good, the run pauses, resume finishes it.

Two sides. A worker process whose Redis (a real redis-server, killed mid-attempt) goes
away reports what it could not store as a transient failure, and when it cannot even
publish that, it returns quietly: its attempt's lease expires and the scheduler sees a
lost worker. And a scheduler whose attempts keep being lost that way pauses the run
once their retries are spent, poisoning nothing; ``pact resume``'s steps give the items
fresh retries and the run completes.
"""

from __future__ import annotations

import random
import time
from pathlib import Path

import pytest

from pact_workers.agents.base import AgentOutput, AgentRequest
from pact_workers.agents.noop import NoopAgent
from pact_workers.agents.replay import ReplayAgent
from pact_workers.artifacts import ArtifactStore
from pact_workers.fleet import Leases, RedisBlobStore, keys, redis_from_url
from pact_workers.models.tree import load_tree
from pact_workers.models.work import ErrorClass, ItemStatus, Phase, ResultMessage, TaskMessage
from pact_workers.runner import execute_task
from pact_workers.sandbox import LocalSandbox
from pact_workers.tasks import WorkerRuntime, run_attempt
from scheduler.executors.base import LEASE_EXPIRED, LostAttempt
from scheduler.executors.local import LocalExecutor
from scheduler.launch import start_run
from scheduler.policy import WORKER_LOST
from scheduler.project import ProjectDir
from scheduler.rebuild import rebuild_state
from scheduler.resume import compute_resume_strategy, execute_resume
from scheduler.run import RunController
from scheduler.settings import Settings
from scheduler.state import RunStatus
from tests.integration.conftest import RedisServer

pytestmark = [pytest.mark.redis, pytest.mark.timeout(120)]

#: Short retry budgets, so that a Redis that stays down is given up on in a second.
REDIS_RETRY_S = 0.5
LEASE_TTL_S = 1.0


class KillsRedis:
    """An agent whose call outlives the worker's Redis: the server dies mid-attempt."""

    name = "kills-redis"

    def __init__(self, server: RedisServer) -> None:
        self.server = server

    def produce(self, request: AgentRequest) -> AgentOutput:
        self.server.kill()
        return NoopAgent().produce(request)


def contract_task(**fields: object) -> TaskMessage:
    return TaskMessage.model_validate(
        {"run_id": "r1", "component_id": "tokens", "phase": "contract", "attempt": 1, **fields}
    )


def test_an_attempt_whose_redis_dies_mid_attempt_fails_transiently_not_permanently(
    private_redis: RedisServer,
) -> None:
    client = redis_from_url(private_redis.url, retry_s=REDIS_RETRY_S)
    store = ArtifactStore(RedisBlobStore(client))

    result = execute_task(
        contract_task(), agent=KillsRedis(private_redis), sandbox=LocalSandbox(), store=store
    )

    assert result.outcome == "error"
    assert result.error_type == "ConnectionError", result.error
    assert result.error_class is ErrorClass.TRANSIENT, result.error
    client.close()


def test_a_worker_that_cannot_publish_because_redis_died_returns_and_its_lease_lapses(
    private_redis: RedisServer,
) -> None:
    client = redis_from_url(private_redis.url, retry_s=REDIS_RETRY_S)
    leases = Leases(client, ttl_s=LEASE_TTL_S)
    runtime = WorkerRuntime(
        broker_url=private_redis.url,
        worker_id="worker-1",
        store=ArtifactStore(RedisBlobStore(client)),
        leases=leases,
        client=client,
        make_agent=lambda *_args, **_kw: KillsRedis(private_redis),
    )
    stream = keys.run_results("r1")
    task = contract_task(agent="kills-redis", reply_to=stream)

    outcome = run_attempt(task.model_dump(mode="json"), runtime)

    assert outcome == "unpublished: Redis unreachable"
    private_redis.start()  # same port, same append-only file
    time.sleep(LEASE_TTL_S + 0.2)
    assert client.xlen(stream) == 0  # nothing was published...
    lease = ("r1", "tokens", "contract", 1)
    assert leases.alive([lease]) == {lease: False}  # ...and the scheduler sees a lost worker
    client.close()


class LosesEveryAttempt:
    """A fleet whose workers take each attempt and then lose Redis: no result ever comes
    back, and every attempt's lease expires (reported once by :meth:`lost`)."""

    name = "loses-every-attempt"
    capacity = 4
    survives_restart = False

    def __init__(self) -> None:
        self.taken: list[tuple[str, Phase, int]] = []

    def submit(self, task: TaskMessage) -> None:
        self.taken.append((task.component_id, task.phase, task.attempt))

    def poll(self, timeout_s: float) -> list[ResultMessage]:
        time.sleep(min(timeout_s, 0.01))
        return []

    def activity(self) -> list[tuple[str, Phase, int]]:
        return []

    def ack(self, result: ResultMessage) -> None:
        pass

    def lost(self) -> list[LostAttempt]:
        lost, self.taken = self.taken, []
        return [LostAttempt(lease, LEASE_EXPIRED) for lease in lost]

    def adopt(self, attempts: list[tuple[str, Phase, int]]) -> None:
        pass

    def close(self) -> None:
        pass


def test_lost_workers_pause_the_run_poison_nothing_and_resume_completes_it(
    example: Path, tmp_path: Path
) -> None:
    project = ProjectDir(tmp_path / "project")
    settings = Settings(max_retries=2, backoff_base_s=0.01, backoff_cap_s=0.05)
    tree = example / "tree.json"
    replay = example / "replay"
    start_run(
        project,
        load_tree(tree),
        tree_bytes=tree.read_bytes(),
        settings=settings,
        agent="replay",
        agent_options={"replay_dir": str(replay)},
    )
    store = project.store()
    lost = RunController(
        project,
        executor=LosesEveryAttempt(),
        store=store,
        settings=settings,
        rng=random.Random(1),
        poll_s=0.01,
    ).drive()

    assert lost.status is RunStatus.PAUSED
    statuses = {i.status for i in lost.items.values()}
    assert ItemStatus.FAILED not in statuses and ItemStatus.POISONED not in statuses
    assert "WorkerLost: the worker's lease expired" in lost.pause_reason
    assert "still failing after 2 retries" in lost.pause_reason
    assert "`pact workers`" in lost.recommendation and "pact resume" in lost.recommendation
    first_wave = [i for i in lost.items.values() if i.last_error_type == WORKER_LOST]
    assert first_wave and all(i.transient_failures > 0 for i in first_wave)

    state = rebuild_state(project.root)
    strategy = compute_resume_strategy(state, project)
    resumed = execute_resume(state, strategy)
    for item in first_wave:
        again = resumed.item(item.component_id, item.phase)
        # Reset; it was dispatched before, so what it waits for is done: ready.
        assert again.status is ItemStatus.READY and again.retry_at is None
        assert again.transient_failures == again.wild_count == 0  # a fresh start

    executor = LocalExecutor(
        workers=4, agent=ReplayAgent(replay), sandbox=LocalSandbox(), store=store
    )
    try:
        done = RunController(
            project, executor=executor, store=store, settings=settings, poll_s=0.05
        ).drive()
    finally:
        executor.close()
    assert done.status is RunStatus.COMPLETED
    assert {i.status for i in done.items.values()} == {ItemStatus.DONE}
