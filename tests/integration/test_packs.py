"""Packs on a real fleet: real redis-server, real ``pact worker`` processes.

Short attempts beyond the fleet's slots travel several to a message
(``scheduler.executors.packing``); each must still run once, under its own fencing
token and lease, and a worker killed with a pack in hand loses none of them.
"""

from __future__ import annotations

import shutil
import threading
import time
from collections import Counter
from pathlib import Path

import pytest
import redis
import yaml

from pact_workers.fleet import keys
from pact_workers.fleet.leases import RUNNING, Leases
from pact_workers.fleet.packs import WaitingLeases, claim_all
from pact_workers.models.work import Phase, TaskMessage
from scheduler.events import ItemDispatched, ItemFailed, ItemSucceeded
from scheduler.executors.celery import CeleryFleet
from scheduler.executors.packing import PACK_BELOW_S
from scheduler.policy import WORKER_LOST
from tests.acceptance.test_crash import check_applied_once
from tests.integration.fleet import Fleet
from tests.integration.test_fleet_faults import (
    AUTHOR_ROLES,
    CODE_ROLES,
    KILLED_RUN_TIMEOUT_S,
    RECOVERY_BOUND_S,
    RUN_TIMEOUT_S,
    attempt_of,
    audit_events,
    check_every_attempt_accounted,
    check_status_completed,
    diagnose,
    redis_client,
    run_args,
    running_attempts,
    ts,
    wait_for,
    wait_for_run_id,
)
from tests.integration.test_lost_messages import send_pack

#: What the replay agent waits before answering a contract or test author in the
#: healthy run: short enough to be packed (PACK_BELOW_S), longer than the lease TTL.
AUTHOR_LATENCY_S = 1.3
#: The same when the authors' worker is killed: only a pack in hand is needed.
KILLED_AUTHOR_LATENCY_S = 0.5
#: The authors' lease TTL in a healthy run: shorter than a pack's second member waits.
SHORT_LEASE_TTL_S = 1.0


def authors_take(example: Path, tmp_path: Path, seconds: float) -> Path:
    """A copy of the example's replay directory whose authors take ``seconds``."""
    replay = tmp_path / "replay"
    shutil.copytree(example / "replay", replay)
    script = yaml.safe_load((replay / "replay.yaml").read_text())
    script["latency_s"] = {role: seconds for role in AUTHOR_ROLES}
    (replay / "replay.yaml").write_text(yaml.safe_dump(script))
    return replay


class LeaseGaps(threading.Thread):
    """Watches a run's leases every 50 ms: an attempt seen running whose lease is later
    gone before its done marker is set (its worker alive) is a gap, which a scheduler
    would have taken for a dead worker."""

    def __init__(self, redis_url: str, run_id: str) -> None:
        super().__init__(daemon=True)
        self.client = redis.Redis.from_url(redis_url)
        self.run_id = run_id
        self.seen: set[str] = set()
        self.gaps: set[str] = set()
        self.halt = threading.Event()

    def run(self) -> None:
        pattern = f"{keys.PREFIX}lease:{self.run_id}:*"
        while not self.halt.wait(0.05):
            found = sorted(self.client.scan_iter(match=pattern, count=1000))
            values = self.client.mget(found) if found else []
            now = {k.decode(): v for k, v in zip(found, values, strict=True) if v is not None}
            self.seen |= {k for k, v in now.items() if v.startswith(RUNNING)}
            for key in self.seen - set(now) - self.gaps:
                _, _, _, component, phase, attempt = key.split(":")
                done = keys.done(self.run_id, component, phase, int(attempt))
                if not self.client.exists(done) and not self.client.exists(key):
                    self.gaps.add(key)

    def stop(self) -> set[str]:
        self.halt.set()
        self.join(5)
        self.client.close()
        return self.gaps


def packed_runs(log: Path) -> list[str]:
    """What the worker logged of each pack it ran ("pack of N: ok, ...")."""
    return [line for line in log.read_text().splitlines() if "pack of " in line]


@pytest.mark.timeout(300)
def test_a_runs_short_attempts_beyond_the_slots_go_in_packs_and_each_is_applied_once(
    redis_url: str, example: Path, tmp_path: Path
) -> None:
    """``pact run --executor celery --workers 8`` on authors with one slot: once the
    first results say the authors' attempts are short, the rest go several to a
    message; the run completes with every item applied once. The authors' lease TTL
    is shorter than a pack's members wait for their turn, so a waiting member whose
    lease were not kept alive would be reported lost."""
    project = tmp_path / "project"
    replay = authors_take(example, tmp_path, AUTHOR_LATENCY_S)
    with Fleet(redis_url, tmp_path / "logs") as fleet, redis_client(redis_url) as client:
        authors = fleet.worker(
            "authors", roles=AUTHOR_ROLES, concurrency=1, lease_ttl_s=SHORT_LEASE_TTL_S
        )
        fleet.worker("coders", roles=CODE_ROLES, concurrency=2)
        args = run_args(example, project, redis_url, replay=replay)
        args[args.index("--workers") + 1] = "8"
        run = fleet.pact(*args, name="run")
        watch = LeaseGaps(redis_url, wait_for_run_id(project, fleet=fleet, run=run))
        watch.start()
        code = fleet.wait(run, RUN_TIMEOUT_S, lambda: diagnose(client, project))
        gaps = watch.stop()
        assert code == 0, fleet.logs()
    check_applied_once(project)
    events = audit_events(project)
    check_every_attempt_accounted(events)
    check_status_completed(project)
    # No attempt was lost (the example's replay fails tokens/test#1 on purpose).
    assert [e for e in events if isinstance(e, ItemFailed) and e.error_type == WORKER_LOST] == []
    packs = packed_runs(authors.log)
    assert packs, f"no pack was sent:\n{fleet.logs()}"
    # A pack's second member waits at least AUTHOR_LATENCY_S for its turn, past the
    # authors' lease TTL: its claimed lease was kept alive all along.
    assert SHORT_LEASE_TTL_S < AUTHOR_LATENCY_S < PACK_BELOW_S
    assert watch.seen and gaps == set()
    # Every member of every pack ran (nothing superseded, nothing lost on the way).
    for line in packs:
        outcomes = line.split("pack of ", 1)[1].split(": ", 1)[1].rstrip("'\"").split(", ")
        assert set(outcomes) == {"ok"}, line


@pytest.mark.timeout(120)
def test_a_pack_member_superseded_before_its_turn_is_skipped_and_the_others_run(
    redis_url: str, tmp_path: Path
) -> None:
    run_id = "r1"  # the run of send_pack's attempts
    fleet_conn = CeleryFleet(redis_url, stream=keys.run_results(run_id))
    with Fleet(redis_url, tmp_path / "logs") as fleet, redis_client(redis_url) as client:
        try:
            # One slot serves the role, and its attempts are known to be short: the three
            # attempts of the flush go in one message.
            send_pack(fleet_conn, client, "c0", "c1", "c2")
            assert fleet_conn.packer.packed_attempts == 3
            # A newer attempt of c1 is dispatched (its current attempt moves past 1)
            # while the pack waits on the queue for a worker.
            client.set(keys.current_attempt(run_id, "c1", "contract"), "2")
            worker = fleet.worker("author", roles=["contract_author"], concurrency=1)
            results = []
            deadline = time.monotonic() + 60
            while len(results) < 2 and time.monotonic() < deadline:
                for result in fleet_conn.read(1.0):
                    results.append(result)
                    fleet_conn.ack(result)
            assert sorted((r.component_id, r.outcome) for r in results) == [
                ("c0", "ok"),
                ("c2", "ok"),
            ], fleet.logs()
            assert fleet_conn.read(1.5) == []  # and none for c1
            wait_for(
                "the pack's outcome in the log", lambda: bool(packed_runs(worker.log)), fleet=fleet
            )
            assert "pack of 3: ok, superseded, ok" in packed_runs(worker.log)[0]
        finally:
            fleet_conn.close()


def test_a_waiting_members_claimed_lease_lives_until_its_turn_and_no_longer(
    redis_url: str,
) -> None:
    client = redis.Redis.from_url(redis_url)
    leases = Leases(client, ttl_s=0.3)
    tasks = [
        TaskMessage(run_id="rw", component_id=f"c{i}", phase=Phase.TEST, attempt=1)
        for i in range(2)
    ]
    lease_keys = [keys.lease("rw", t.component_id, "test", 1) for t in tasks]
    assert claim_all(leases, tasks, "w1") == [True, True]
    with WaitingLeases(leases, tasks, "w1") as waiting:
        time.sleep(1.0)  # over three TTLs
        assert [client.exists(k) for k in lease_keys] == [1, 1]
        waiting.started(tasks[0])  # its own hold would renew it from here
        time.sleep(1.0)
        assert [client.exists(k) for k in lease_keys] == [0, 1]
    time.sleep(0.6)
    assert client.exists(lease_keys[1]) == 0  # the pack ended: nothing renews it
    client.close()


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_a_worker_killed_with_a_pack_in_hand_loses_none_of_its_attempts(
    redis_url: str, example: Path, tmp_path: Path
) -> None:
    """The authors' only worker (one slot) is killed while it holds a pack: at least
    two of its attempts' leases say it runs them. Every attempt it had not finished
    is reported lost and dispatched again within the recovery bound, and the run
    completes with each item applied once."""
    project = tmp_path / "project"
    replay = authors_take(example, tmp_path, KILLED_AUTHOR_LATENCY_S)
    with Fleet(redis_url, tmp_path / "logs") as fleet, redis_client(redis_url) as client:
        authors = fleet.worker("authors", roles=AUTHOR_ROLES, concurrency=1, lease_ttl_s=3.0)
        fleet.worker("coders", roles=CODE_ROLES, concurrency=2)
        args = run_args(example, project, redis_url, replay=replay)
        args[args.index("--workers") + 1] = "8"
        run = fleet.pact(*args, name="run")
        run_id = wait_for_run_id(project, fleet=fleet, run=run)
        held: list[tuple[str, Phase, int]] = []

        def pack_in_hand() -> bool:
            held[:] = running_attempts(client, run_id, (Phase.CONTRACT, Phase.TEST))
            return len(held) >= 2

        wait_for("a pack in the authors' hands", pack_in_hand, fleet=fleet, run=run)
        killed_at = authors.lose()
        fleet.worker("authors-2", roles=AUTHOR_ROLES, concurrency=1, lease_ttl_s=3.0)
        code = fleet.wait(run, KILLED_RUN_TIMEOUT_S * 2, lambda: diagnose(client, project))
        assert code == 0, fleet.logs()
    check_applied_once(project)
    events = audit_events(project)
    check_every_attempt_accounted(events)
    check_status_completed(project)
    lost = [e for e in events if isinstance(e, ItemFailed) and e.error_type == WORKER_LOST]
    finished = {attempt_of(e) for e in events if isinstance(e, ItemSucceeded)}
    unfinished = [a for a in held if a not in finished]
    assert unfinished, f"the whole pack {held} finished before the kill"
    assert {attempt_of(e) for e in lost} >= set(unfinished), (held, [attempt_of(e) for e in lost])
    dispatched = Counter(
        (e.component_id, e.phase, e.attempt) for e in events if isinstance(e, ItemDispatched)
    )
    for e in lost:
        again = [
            d
            for d in events
            if isinstance(d, ItemDispatched)
            and (d.component_id, d.phase, d.attempt) == (e.component_id, e.phase, e.attempt + 1)
        ]
        assert len(again) == 1, attempt_of(e)
        assert 0 < ts(again[0]) - killed_at < RECOVERY_BOUND_S, attempt_of(e)
    assert all(n == 1 for n in dispatched.values())
