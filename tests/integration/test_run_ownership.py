"""What lets scheduler services share runs, against a real redis-server: run leases and
their fencing tokens, the fence before every audit write, the fleet-wide caps, the
submission queue's consumers, the registry's merged entries and the per-run result
streams. The same pieces with real processes: ``test_scheduler_failover.py``."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from pact_workers.fleet import keys, publish_result, redis_from_url
from pact_workers.fleet.leases import Leases
from pact_workers.fleet.results import ResultStreams
from pact_workers.models.tree import load_tree
from pact_workers.models.work import ErrorClass, Phase, ResultMessage, TaskMessage
from scheduler.audit import read_events
from scheduler.capacity import FleetCaps, live_schedulers, runs_in_flight
from scheduler.executors.celery import CeleryFleet
from scheduler.executors.celery_executor import CeleryExecutor
from scheduler.launch import start_run
from scheduler.ownership import Holder, LeaseLost, RunLeases, lease_holders
from scheduler.project import ProjectDir
from scheduler.registry import (
    SubmissionQueue,
    get_run,
    queue_submissions,
    update_run,
)
from scheduler.run import RunController
from scheduler.settings import Settings
from tests.integration.conftest import RedisServer

pytestmark = [pytest.mark.redis, pytest.mark.timeout(120)]

#: A lease TTL short enough to let leases expire within a test.
TTL_S = 1.0


@pytest.fixture
def client(redis_url: str) -> Iterator[redis.Redis]:
    made = redis_from_url(redis_url, retry_s=5.0)
    yield made
    made.close()


def wait_until(what: str, check: Callable[[], bool], timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, f"not within {timeout_s} s: {what}"
        time.sleep(0.01)


def expire_now(client: redis.Redis, run_id: str) -> None:
    """What a paused owner's lease does after a TTL: it goes."""
    client.pexpire(keys.owner(run_id), 1)
    wait_until("the lease expired", lambda: not client.exists(keys.owner(run_id)))


def new_run(example: Path, root: Path, run_id: str) -> ProjectDir:
    project = ProjectDir(root)
    tree_path = example / "tree.json"
    start_run(
        project,
        load_tree(tree_path),
        tree_bytes=tree_path.read_bytes(),
        settings=Settings(),
        agent="replay",
        agent_options={"replay_dir": str(example / "replay")},
        run_id=run_id,
    )
    return project


def controller(
    project: ProjectDir, fleet: CeleryFleet, run_id: str, fence: Callable[[], None]
) -> RunController:
    return RunController(
        project,
        executor=CeleryExecutor(fleet, run_id, capacity=100),
        store=project.store(),
        settings=Settings(),
        fence=fence,
    )


def test_each_acquisition_gets_a_larger_token_and_a_run_has_one_holder(
    client: redis.Redis,
) -> None:
    a = RunLeases(client, "host:1:aaaaaa", TTL_S)
    b = RunLeases(client, "host:2:bbbbbb", TTL_S)
    first = a.acquire("r1")
    assert first is not None
    assert b.acquire("r1") is None
    assert lease_holders(client, ["r1", "r2"])["r1"] == Holder(first, "host:1:aaaaaa")
    assert lease_holders(client, ["r2"])["r2"] is None
    # Extending needs the whole value: b cannot renew a's lease.
    assert b.renew({"r1": first}) == {"r1"}
    assert a.renew({"r1": first}) == set()
    expire_now(client, "r1")
    second = b.acquire("r1")
    assert second is not None and second > first
    assert a.renew({"r1": first}) == {"r1"}
    # a releasing what it no longer holds changes nothing; b's release frees the run.
    a.release("r1", first)
    assert client.exists(keys.owner("r1"))
    b.release("r1", second)
    assert not client.exists(keys.owner("r1"))
    # The same scheduler may take a run back (a new token): after it gave the run up.
    third = b.acquire("r1")
    again = b.acquire("r1")
    assert third is not None and again is not None and again > third > second


def transient_failure(run_id: str, component_id: str, phase: Phase) -> ResultMessage:
    return ResultMessage(
        run_id=run_id,
        component_id=component_id,
        phase=phase,
        attempt=1,
        outcome="error",
        error_class=ErrorClass.TRANSIENT,
        error_type="ConnectionError",
        error="ConnectionError: reset by peer",
    )


def test_an_owner_that_lost_its_lease_cannot_append_one_line_to_the_run(
    client: redis.Redis, redis_url: str, example: Path, tmp_path: Path
) -> None:
    """A paused owner resumes after another scheduler adopted the run: its next commit
    is refused by the fence before a byte is written, and nothing it decided is sent."""
    run_id = "f0e1d2c3b4a5"
    project = new_run(example, tmp_path / "run", run_id)
    old = RunLeases(client, "host:1:aaaaaa", TTL_S)
    new = RunLeases(client, "host:2:bbbbbb", TTL_S)
    token = old.acquire(run_id)
    assert token is not None
    fleet = CeleryFleet(redis_url)
    other = CeleryFleet(redis_url)
    try:
        paused = controller(project, fleet, run_id, old.fence(run_id, token))
        paused.open()
        paused.dispatch_ready()  # the owner's own writes pass the fence
        fleet.flush()
        flying = [(i.component_id, i.phase) for i in paused.state.in_flight()]
        assert len(flying) >= 2
        written = project.audit_path.read_bytes()
        # Paused past its lease: another scheduler takes the run.
        expire_now(client, run_id)
        adopted = new.acquire(run_id)
        assert adopted is not None and adopted > token
        # The old owner resumes with a decision staged; the commit is refused, and the
        # retry it decided is never sent.
        paused.handle(transient_failure(run_id, *flying[0]))
        with pytest.raises(LeaseLost, match="host:2:bbbbbb"):
            paused.commit()
        assert project.audit_path.read_bytes() == written
        paused.journal.audit.close()
        # The new owner opens the run and writes under its own token.
        owner = controller(project, other, run_id, new.fence(run_id, adopted))
        owner.open()
        assert owner.state.last_seq == len(read_events(project.audit_path)[0])
        owner.handle(transient_failure(run_id, *flying[1]))
        owner.commit()
        events = read_events(project.audit_path)[0]
        assert [e.seq for e in events] == list(range(1, len(events) + 1))
        assert project.audit_path.read_bytes().startswith(written)
        assert len(events) == owner.state.last_seq > paused.state.last_seq - 1
        owner.close()
    finally:
        fleet.close()
        other.close()


def test_a_fence_that_cannot_reach_redis_refuses_the_write(
    private_redis: RedisServer,
) -> None:
    made = redis_from_url(private_redis.url, retry_s=5.0)
    try:
        leases = RunLeases(made, "host:1:aaaaaa", TTL_S)
        token = leases.acquire("r1")
        assert token is not None
        fence = leases.fence("r1", token)
        fence()
        private_redis.kill()
        with pytest.raises(LeaseLost, match="cannot confirm"):
            fence()
    finally:
        made.close()


def test_renewal_names_the_runs_whose_lease_is_gone(client: redis.Redis) -> None:
    mine = RunLeases(client, "host:1:aaaaaa", TTL_S)
    held = {run: mine.acquire(run) for run in ("r1", "r2", "r3")}
    tokens = {run: t for run, t in held.items() if t is not None}
    assert len(tokens) == 3
    client.delete(keys.owner("r2"))
    RunLeases(client, "host:2:bbbbbb", TTL_S).acquire("r2")
    expire_now(client, "r3")
    assert mine.renew(tokens) == {"r2", "r3"}
    assert client.pttl(keys.owner("r1")) > 0


def test_orphans_are_the_active_runs_nobody_holds(client: redis.Redis) -> None:
    for run in ("r1", "r2", "r3"):
        update_run(client, run, state="active")
    update_run(client, "r4", state="completed")
    RunLeases(client, "host:1:aaaaaa", TTL_S).acquire("r2")
    assert RunLeases(client, "host:2:bbbbbb", TTL_S).orphans() == ["r1", "r3"]


def test_registry_updates_merge_fields_and_keep_the_active_set(client: redis.Redis) -> None:
    update_run(client, "r1", state="active", name="calc.json", priority=2)
    update_run(client, "r1", items_done=3, owner="host:1:aaaaaa")
    update_run(client, "r1", reason='a "quoted" \\ reason / ünïcode')
    entry = get_run(client, "r1")
    assert entry is not None
    assert (entry.state, entry.name, entry.priority, entry.items_done, entry.owner) == (
        "active",
        "calc.json",
        2,
        3,
        "host:1:aaaaaa",
    )
    assert entry.reason == 'a "quoted" \\ reason / ünïcode'
    assert client.smembers(keys.ACTIVE_RUNS) == {b"r1"}
    update_run(client, "r1", state="completed")
    assert client.smembers(keys.ACTIVE_RUNS) == set()


def test_fleet_caps_hold_across_schedulers_and_are_shared_by_demand(client: redis.Redis) -> None:
    caps = {"code_author": 4, "integrator": 1}
    a = FleetCaps(client, "host:1:aaaaaa", caps=caps, ttl_s=30)
    b = FleetCaps(client, "host:2:bbbbbb", caps=caps, ttl_s=30)
    assert b.reserve({"rb": {}}, {"code_author": 2}).slots == {"code_author": 2, "integrator": 0}
    # b has not dispatched its two yet: they count. a gets the two left.
    second = a.reserve({"ra1": {}, "ra2": {}}, {"code_author": 6, "integrator": 3})
    assert second.slots == {"code_author": 2, "integrator": 1}
    assert second.others == {"host:2:bbbbbb": 1}
    # Both dispatched what they got: full, nobody gets more until attempts end.
    assert b.reserve({"rb": {"code_author": 2}}, {"code_author": 5}).slots["code_author"] == 0
    full = a.reserve({"ra1": {"code_author": 2}, "ra2": {"integrator": 1}}, {"code_author": 4})
    assert full.slots == {"code_author": 0, "integrator": 0}
    # a's two end: the 2 free slots are shared by what each waits for (4 : 5).
    assert a.reserve({"ra1": {}, "ra2": {}}, {"code_author": 4}).slots["code_author"] == 1
    # One of b's ends too: b gets what is left once a's share is counted.
    assert b.reserve({"rb": {"code_author": 1}}, {"code_author": 5}).slots["code_author"] == 2
    reserved = sum(d["reserved"]["code_author"] for d in live_schedulers(client).values())
    flying = sum(n.get("code_author", 0) for n in runs_in_flight(client).values())
    assert reserved + flying == 4


def test_a_runs_attempts_stay_counted_while_it_changes_owner(client: redis.Redis) -> None:
    caps = {"code_author": 2}
    leaving = FleetCaps(client, "host:1:aaaaaa", caps=caps, ttl_s=30)
    staying = FleetCaps(client, "host:2:bbbbbb", caps=caps, ttl_s=30)
    leaving.reserve({"r1": {"code_author": 2}}, {})
    leaving.leave({"r1": {"code_author": 2}})  # a clean stop: r1's two still run
    assert set(live_schedulers(client)) == set()
    assert staying.reserve({"r2": {}}, {"code_author": 3}).slots["code_author"] == 0
    # r1 adopted: counted once, as its new owner counts it.
    assert staying.reserve({"r1": {"code_author": 1}, "r2": {}}, {"code_author": 3}).slots == {
        "code_author": 1
    }
    staying.forget_run("r1")  # r1 ended
    assert set(runs_in_flight(client)) == {"r2"}


def test_a_dead_schedulers_counts_go_stale(client: redis.Redis) -> None:
    caps = {"code_author": 2}
    ttl_s = 0.25  # entries stale after 0.5 s, run counts after 1.5 s
    dead = FleetCaps(client, "host:1:aaaaaa", caps=caps, ttl_s=ttl_s)
    live = FleetCaps(client, "host:2:bbbbbb", caps=caps, ttl_s=ttl_s)
    # One attempt of r1 in flight, one more granted (and maybe dispatched): full.
    assert dead.reserve({"r1": {"code_author": 1}}, {"code_author": 2}).slots["code_author"] == 1
    assert live.reserve({}, {"code_author": 2}).slots["code_author"] == 0
    # Its entry goes stale after two TTLs (its grant counts no more), r1's count later
    # (nobody adopted r1).
    wait_until(
        "the dead scheduler's entry is stale",
        lambda: "host:1:aaaaaa" not in live_schedulers(client, stale_s=2 * ttl_s),
    )
    assert live.reserve({}, {"code_author": 2}).slots["code_author"] == 1
    assert set(live_schedulers(client)) == {"host:2:bbbbbb"}
    live.reserve({}, {})
    wait_until(
        "r1's count is stale",
        lambda: (live.reserve({}, {}), "r1" not in runs_in_flight(client))[1],
    )
    assert live.reserve({}, {"code_author": 2}).slots["code_author"] == 2


def test_a_submission_read_by_a_scheduler_that_died_is_claimed_by_another(
    client: redis.Redis, example: Path
) -> None:
    tree = example / "tree.json"
    queue_submissions(client, [(tree, tree.read_text()), (tree, tree.read_text())])
    dead = SubmissionQueue(client, "host:1:aaaaaa", claim_idle_s=0.2)
    live = SubmissionQueue(client, "host:2:bbbbbb", claim_idle_s=0.2)
    taken = dead.take(1)
    assert len(taken) == 1 and taken[0][1] is not None
    # Not idle long enough yet: the live one gets the other, new, entry.
    fresh = live.take(5)
    assert [s.run_id for _, s in fresh if s] != [taken[0][1].run_id]
    assert len(fresh) == 1
    live.ack(fresh[0][0])
    time.sleep(0.3)  # the dead one's entry idles past the claim time
    claimed = live.take(5)
    assert [e for e, _ in claimed] == [taken[0][0]]
    live.ack(claimed[0][0])
    assert live.take(5) == []

    def consumers() -> set[str]:
        found = client.xinfo_consumers(keys.SUBMISSIONS, keys.SUBMISSIONS_GROUP)
        return {c["name"].decode() for c in found}

    dead.forget_idle_consumers(idle_s=0.2)  # idle since its last read: forgotten
    assert consumers() == {"host:2:bbbbbb"}
    live.forget_idle_consumers(idle_s=3600)
    assert consumers() == {"host:2:bbbbbb"}
    live.leave()
    assert consumers() == set()


def result_of(run_id: str, component: str) -> ResultMessage:
    return ResultMessage(
        run_id=run_id, component_id=component, phase=Phase.CONTRACT, attempt=1, outcome="ok"
    )


def test_runs_result_streams_are_read_together_and_left_pending_for_the_next_owner(
    client: redis.Redis,
) -> None:
    streams = ResultStreams(client, claim_idle_ms=200)
    for run in ("r1", "r2"):
        streams.attach(keys.run_results(run))
    publish_result(client, keys.run_results("r1"), result_of("r1", "a"))
    publish_result(client, keys.run_results("r2"), result_of("r2", "b"))
    got = streams.read(block_ms=1000)
    assert sorted((d.stream, d.result.component_id) for d in got) == [
        (keys.run_results("r1"), "a"),
        (keys.run_results("r2"), "b"),
    ]
    streams.ack(keys.run_results("r1"), [d.entry_id for d in got if d.result.run_id == "r1"])
    # The owner of r2 stops before acknowledging; the next owner reads it first.
    streams.detach(keys.run_results("r2"))
    publish_result(client, keys.run_results("r2"), result_of("r2", "c"))
    assert streams.read(block_ms=100) == []
    heir = ResultStreams(client, claim_idle_ms=200)
    heir.attach(keys.run_results("r2"))
    assert [d.result.component_id for d in heir.read(block_ms=100)] == ["b"]
    assert [d.result.component_id for d in heir.read(block_ms=1000)] == ["c"]


def test_an_adopted_attempt_whose_message_was_sent_is_not_dispatched_again(
    client: redis.Redis, redis_url: str
) -> None:
    tasks = [
        TaskMessage(run_id="r1", component_id=c, phase=Phase.CONTRACT, attempt=1, agent="noop")
        for c in ("sent", "unsent")
    ]
    leases = Leases(client)
    leases.dispatch_many(tasks)
    leases.mark_sent(tasks[:1])
    assert client.get(keys.lease("r1", "sent", Phase.CONTRACT, 1)) == b"sent"
    assert client.pttl(keys.lease("r1", "sent", Phase.CONTRACT, 1)) > 3600_000
    fleet = CeleryFleet(redis_url)
    try:
        fleet.adopt([("r1", t.component_id, t.phase, 1) for t in tasks])
        assert [lost.lease for lost in fleet.lost("r1")] == [("unsent", Phase.CONTRACT, 1)]
        assert fleet.lost("r1") == []
    finally:
        fleet.close()
    # A worker that claimed the attempt first is not overwritten by the marker.
    leases.claim(tasks[1], "w1")
    leases.mark_sent(tasks[1:])
    assert client.get(keys.lease("r1", "unsent", Phase.CONTRACT, 1)) == b"running:w1"


def test_a_service_stalled_while_creating_a_run_gives_it_up_to_the_one_that_took_it(
    client: redis.Redis, example: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A service that froze between logging ``run_started`` and writing the first
    snapshot finds, when it wakes, its lease gone and the snapshot's temporary file
    swept by the service that took the run over: it gives the run up (no crash, no
    acknowledgement, no rejection) and the other drives it."""
    from scheduler.intake import Intake
    from scheduler.registry import SubmissionQueue, get_run, queue_submissions

    tree = example / "tree.json"
    (entry,) = queue_submissions(client, [(tree, tree.read_text())])
    run_id = entry.run_id
    runs_dir = tmp_path / "runs"
    opened: list[str] = []

    def intake(name: str) -> Intake:
        return Intake(
            client=client,
            leases=RunLeases(client, name, TTL_S),
            submissions=SubmissionQueue(client, name, claim_idle_s=0.2),
            runs_dir=runs_dir,
            retry_after_s=1.0,
            scan_every_s=0.0,
            clock=time.time,
            open_run=lambda rid, token: opened.append(f"{name}:{rid}"),
        )

    stalled, other = intake("host:1:aaaaaa"), intake("host:2:bbbbbb")
    real_write = ProjectDir.write_state

    def freeze_then_find_it_swept(self: ProjectDir, state: Any, **kwargs: Any) -> None:
        # Frozen past the TTL: the lease goes, the other service claims the submission,
        # opens the run (sweeping temporary files) and takes a lease of its own.
        monkeypatch.setattr(ProjectDir, "write_state", real_write)
        expire_now(client, run_id)
        time.sleep(0.3)  # the submission idles past its claim time
        other.take_submissions(1)
        raise FileNotFoundError(2, "No such file or directory", ".state.json.tmp")

    monkeypatch.setattr(ProjectDir, "write_state", freeze_then_find_it_swept)
    stalled.take_submissions(1)  # must not raise

    assert opened == [f"host:2:bbbbbb:{run_id}"]
    found = get_run(client, run_id)
    assert found is not None and found.state == "active"
    assert lease_holders(client, [run_id])[run_id] is not None
    assert lease_holders(client, [run_id])[run_id].scheduler_id == "host:2:bbbbbb"
    assert stalled.submissions.take(5) == [] and other.submissions.take(5) == []
