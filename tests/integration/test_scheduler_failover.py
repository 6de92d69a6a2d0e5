"""Scheduler services that share the load, with real processes: several ``pact scheduler``
processes, real ``pact worker`` processes and a real redis-server, one runs directory.

A SIGKILLed scheduler's runs are adopted by another within two lease TTLs, ten times
over, and every run completes with each item applied once; a scheduler frozen past
its leases gives its runs up when it wakes, and they still complete; a scheduler
stopped cleanly hands its runs over at once; the in-flight caps hold across
schedulers; ``pact runs`` names each run's owner.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import redis
import yaml

from pact_workers.models.work import Phase
from scheduler.audit import read_events
from scheduler.capacity import live_schedulers
from scheduler.commands.fleet import submit_batch
from scheduler.events import ItemDispatched, ItemFailed, ItemSucceeded
from scheduler.ownership import lease_holders
from scheduler.project import ProjectDir
from scheduler.registry import RunEntry, get_run, list_runs
from tests.acceptance.test_crash import check_applied_once
from tests.integration.fleet import Fleet, Proc, pact_argv

pytestmark = [pytest.mark.slow, pytest.mark.redis]

ALL_ROLES = ["contract_author", "test_author", "code_author", "integrator"]
KILLS = int(os.environ.get("PACT_FAILOVER_KILLS", "10"))
#: The schedulers' lease TTL in the kill test: short, so that ten kills take a minute.
TTL_S = 4.0
#: Runs kept going while schedulers are killed, so that every victim owns some.
RUNS_IN_FLIGHT = 4
#: What the replay agent waits before each answer: a run lasts long enough for kills
#: to land mid-run.
AGENT_LATENCY_S = 0.3
#: Generous bounds on waiting (never asserted as durations).
WAIT_S = 240.0


@contextmanager
def redis_client(url: str) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(url, socket_timeout=10)
    try:
        yield client
    finally:
        client.close()


def slow_replay(example: Path, tmp_path: Path) -> Path:
    replay = tmp_path / "replay"
    shutil.copytree(example / "replay", replay)
    script = yaml.safe_load((replay / "replay.yaml").read_text())
    script["latency_s"] = {role: AGENT_LATENCY_S for role in ALL_ROLES}
    (replay / "replay.yaml").write_text(yaml.safe_dump(script))
    return replay


class Trees:
    """Copies of the example tree, submitted through the same function as ``pact submit``."""

    def __init__(self, example: Path, replay: Path, directory: Path, broker: str) -> None:
        self.example = example
        self.replay = replay
        self.directory = directory
        self.broker = broker
        self.submitted: set[str] = set()
        directory.mkdir(parents=True, exist_ok=True)

    def submit(self, n: int) -> set[str]:
        paths = []
        for _ in range(n):
            path = self.directory / f"calc{len(self.submitted) + len(paths)}.json"
            shutil.copyfile(self.example / "tree.json", path)
            paths.append(path)
        queued, errors = submit_batch(
            broker_url=self.broker,
            trees=paths,
            priority=0,
            agent="replay",
            replay_dir=self.replay,
        )
        assert errors == []
        ids = {e.run_id for e in queued}
        self.submitted |= ids
        return ids


def scheduler(fleet: Fleet, runs_dir: Path, ttl_s: float, *extra: str, name: str) -> Proc:
    return fleet.pact(
        "scheduler",
        "--broker",
        fleet.broker_url,
        "--runs-dir",
        str(runs_dir),
        "--lease-ttl",
        str(ttl_s),
        *extra,
        name=name,
    )


def state_of(client: redis.Redis, run_id: str) -> str:
    entry = get_run(client, run_id)
    return entry.state if entry else ""


def pid_of(scheduler_id: str) -> int:
    """The process id in a scheduler id (``host:pid:suffix``)."""
    return int(scheduler_id.rsplit(":", 2)[1])


def owned(client: redis.Redis) -> dict[str, list[str]]:
    """Scheduler id -> the active runs whose lease it holds and that it has opened (the
    registry names it the owner once the run is open)."""
    active = {e.run_id: e for e in list_runs(client) if e.state == "active"}
    out: dict[str, list[str]] = {}
    for run_id, holder in lease_holders(client, active).items():
        if holder is not None and active[run_id].owner == holder.scheduler_id:
            out.setdefault(holder.scheduler_id, []).append(run_id)
    return out


def freeze(proc: Proc) -> None:
    """SIGSTOP the process and wait until it is stopped (a signal is delivered when the
    process next leaves the kernel: a write in progress completes first)."""
    os.killpg(proc.pid, signal.SIGSTOP)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        stat = Path(f"/proc/{proc.pid}/stat").read_bytes()
        if stat[stat.rfind(b")") + 2 :].split()[0] == b"T":
            return
        time.sleep(0.01)
    pytest.fail(f"{proc.name} did not stop")


def wait_for(what: str, check: Callable[[], bool], fleet: Fleet, timeout_s: float = WAIT_S) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        if time.monotonic() > deadline:
            pytest.fail(f"not within {timeout_s:.0f} s: {what}\n{fleet.logs()}")
        time.sleep(0.05)


def wait_until_done(client: redis.Redis, run_ids: set[str], fleet: Fleet) -> list[RunEntry]:
    def done() -> bool:
        entries = [get_run(client, r) for r in run_ids]
        return all(e is not None and e.state not in {"queued", "active"} for e in entries)

    wait_for(f"runs {sorted(run_ids)} end", done, fleet)
    entries = [e for e in (get_run(client, r) for r in run_ids) if e is not None]
    assert {e.state for e in entries} == {"completed"}, [e.model_dump() for e in entries]
    return entries


def check_every_run(entries: list[RunEntry]) -> None:
    for entry in entries:
        assert entry.items_done == entry.items_total == 30, entry
        check_applied_once(Path(entry.project_dir))


def adoption(client: redis.Redis, run_id: str, victim: str, killed_at: float) -> float | None:
    """Seconds from the kill until another scheduler had opened ``run_id`` (None: not yet)."""
    entry = get_run(client, run_id)
    if entry is None or entry.owner in {"", victim} or entry.owner_since < killed_at:
        return None
    return entry.owner_since - killed_at


def busiest(client: redis.Redis, live: dict[int, Proc], fleet: Fleet) -> tuple[str, list[str]]:
    """The live scheduler that owns the most active runs (waiting for one to own any)."""
    found: dict[str, list[str]] = {}

    def any_owner() -> bool:
        found.clear()
        found.update({s: r for s, r in owned(client).items() if pid_of(s) in live})
        return bool(found)

    wait_for("a live scheduler owns an active run", any_owner, fleet)
    victim = max(found, key=lambda s: len(found[s]))
    return victim, found[victim]


def wait_for_adoption(
    client: redis.Redis, run_id: str, victim: str, killed_at: float, fleet: Fleet
) -> float:
    """Seconds from ``killed_at`` until another scheduler than ``victim`` opened ``run_id``."""
    wait_for(
        f"run {run_id} of scheduler {victim} adopted",
        lambda: adoption(client, run_id, victim, killed_at) is not None,
        fleet,
    )
    delay = adoption(client, run_id, victim, killed_at)
    assert delay is not None
    return delay


@pytest.mark.timeout(900)
def test_a_killed_schedulers_runs_are_adopted_within_two_lease_ttls_ten_times(
    redis_url: str, example: Path, tmp_path: Path
) -> None:
    runs_dir = tmp_path / "runs"
    trees = Trees(example, slow_replay(example, tmp_path), tmp_path / "trees", redis_url)
    delays: list[float] = []
    with Fleet(redis_url, tmp_path / "logs") as fleet, redis_client(redis_url) as client:
        fleet.worker("w1", roles=ALL_ROLES, concurrency=3, lease_ttl_s=3)
        fleet.worker("w2", roles=ALL_ROLES, concurrency=3, lease_ttl_s=3)
        live = {}
        for i in range(3):
            proc = scheduler(fleet, runs_dir, TTL_S, name=f"scheduler{i}")
            live[proc.pid] = proc
        kills = 0
        while kills < KILLS:
            going = [r for r in trees.submitted if state_of(client, r) in {"queued", "active"}]
            trees.submit(max(0, RUNS_IN_FLIGHT - len(going)))
            victim, its_runs = busiest(client, live, fleet)
            killed_at = live.pop(pid_of(victim)).lose()
            tokens = {r: h.token for r, h in lease_holders(client, its_runs).items() if h}
            # What it owned and had not finished (it cannot change anything any more).
            orphaned = [r for r in its_runs if state_of(client, r) == "active"]
            proc = scheduler(fleet, runs_dir, TTL_S, name=f"scheduler{3 + kills}")
            if not orphaned:
                continue  # it finished its runs just before the kill: not a failover
            kills += 1
            for run_id in orphaned:
                delay = wait_for_adoption(client, run_id, victim, killed_at, fleet)
                delays.append(delay)
                holder = lease_holders(client, [run_id])[run_id]
                assert holder is None or holder.token > tokens[run_id]
                assert delay <= 2 * TTL_S, (
                    f"kill {kills}: run {run_id} adopted {delay / TTL_S:.2f} TTLs after "
                    f"the kill\n{fleet.logs()}"
                )
            print(
                f"kill {kills}: {len(orphaned)} run(s) adopted after "
                + ", ".join(f"{d / TTL_S:.2f}" for d in delays[-len(orphaned) :])
                + " TTLs"
            )
            live[proc.pid] = proc
        entries = wait_until_done(client, trees.submitted, fleet)
        check_every_run(entries)
    print(
        f"adoption after a kill, in TTLs: max {max(delays) / TTL_S:.2f}, "
        f"mean {sum(delays) / len(delays) / TTL_S:.2f} over {len(delays)} runs"
    )


@pytest.mark.timeout(600)
def test_a_scheduler_frozen_past_its_leases_gives_its_runs_up_when_it_wakes(
    redis_url: str, example: Path, tmp_path: Path
) -> None:
    """SIGSTOP a scheduler until its leases have long expired. On this machine its
    runs stay locked (a second process never opens a run the first still has open), so
    nothing is written to them meanwhile; woken up, it finds its leases gone, gives the
    runs up without writing, and they are taken again (new tokens) and complete."""
    ttl_s = 2.0
    runs_dir = tmp_path / "runs"
    trees = Trees(example, slow_replay(example, tmp_path), tmp_path / "trees", redis_url)
    with Fleet(redis_url, tmp_path / "logs") as fleet, redis_client(redis_url) as client:
        fleet.worker("w", roles=ALL_ROLES, concurrency=4, lease_ttl_s=3)
        live = {}
        for i in range(2):
            proc = scheduler(fleet, runs_dir, ttl_s, name=f"scheduler{i}")
            live[proc.pid] = proc
        trees.submit(3)
        frozen_id, its_runs = busiest(client, live, fleet)
        frozen = live[pid_of(frozen_id)]
        freeze(frozen)
        try:
            tokens = {r: h.token for r, h in lease_holders(client, its_runs).items() if h}
            logs = {r: ProjectDir(runs_dir / r).audit_path for r in tokens}
            written = {r: path.read_bytes() for r, path in logs.items()}
            wait_for(
                "the frozen scheduler's leases expired",
                lambda: (
                    not any(lease_holders(client, tokens).values())
                    or all(
                        h is None or h.token > tokens[r]
                        for r, h in lease_holders(client, tokens).items()
                    )
                ),
                fleet,
            )
            time.sleep(2 * ttl_s)  # others loop on meanwhile; none may write these runs
            assert {r: path.read_bytes() for r, path in logs.items()} == written
            assert all(h is None for h in lease_holders(client, tokens).values())
        finally:
            os.killpg(frozen.pid, signal.SIGCONT)
        wait_until_done(client, trees.submitted, fleet)
        assert frozen.running()
        for run_id, token in tokens.items():
            entry = get_run(client, run_id)
            assert entry is not None and entry.lease_token > token, entry
        check_every_run([e for e in map(lambda r: get_run(client, r), trees.submitted) if e])


def implement_overlap(entries: list[RunEntry]) -> int:
    """The most implementation attempts ever in flight at once, across ``entries``' runs,
    from their audit logs (dispatch to outcome; an end before a start at equal times)."""
    edges: list[tuple[str, int]] = []
    for entry in entries:
        events, _ = read_events(ProjectDir(Path(entry.project_dir)).audit_path)
        for event in events:
            if isinstance(event, ItemDispatched) and event.phase is Phase.IMPLEMENT:
                edges.append((event.ts, 1))
            elif isinstance(event, ItemSucceeded | ItemFailed) and event.phase is Phase.IMPLEMENT:
                edges.append((event.ts, -1))
    most = flying = 0
    for _, step in sorted(edges):
        flying += step
        most = max(most, flying)
    return most


@pytest.mark.timeout(600)
def test_two_schedulers_share_runs_under_global_caps_and_a_clean_stop_hands_them_over(
    redis_url: str, example: Path, tmp_path: Path
) -> None:
    """Two schedulers capped at two implementations in flight between them: both drive
    runs, ``pact runs`` names each run's owner, and at no moment are more than two
    implementations in flight. SIGTERM one: its runs are taken long before its leases
    could have expired, and every run completes."""
    ttl_s = 30.0  # a handover that waited for expiry would take this long
    cap = 2
    runs_dir = tmp_path / "runs"
    trees = Trees(example, slow_replay(example, tmp_path), tmp_path / "trees", redis_url)
    with Fleet(redis_url, tmp_path / "logs") as fleet, redis_client(redis_url) as client:
        fleet.worker("w1", roles=ALL_ROLES, concurrency=3, lease_ttl_s=3)
        fleet.worker("w2", roles=ALL_ROLES, concurrency=3, lease_ttl_s=3)
        caps = ("--max-in-flight", f"code_author={cap}")
        live = {}
        for i in range(2):
            proc = scheduler(fleet, runs_dir, ttl_s, *caps, name=f"scheduler{i}")
            live[proc.pid] = proc
        # Runs spread once each scheduler knows of the other.
        wait_for("both schedulers loop", lambda: len(live_schedulers(client)) == 2, fleet)
        trees.submit(4)
        wait_for("both schedulers own runs", lambda: len(owned(client)) == 2, fleet)

        shown = subprocess.run(
            pact_argv("runs", "--broker", redis_url, "--json"),
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert shown.returncode == 0, shown.stderr
        by_run = {e["run_id"]: e for e in json.loads(shown.stdout)}
        for scheduler_id, run_ids in owned(client).items():
            for run_id in run_ids:
                if by_run[run_id]["state"] == "active":
                    assert by_run[run_id]["owner"] == scheduler_id
        table = subprocess.run(
            pact_argv("runs", "--broker", redis_url), capture_output=True, text=True, timeout=60
        )
        assert table.returncode == 0 and "owner" in table.stdout.splitlines()[1], table.stdout

        stopping_id, its_runs = busiest(client, live, fleet)
        stopped_at = time.time()
        live.pop(pid_of(stopping_id)).stop()
        orphaned = [r for r in its_runs if state_of(client, r) == "active"]
        for run_id in orphaned:
            delay = wait_for_adoption(client, run_id, stopping_id, stopped_at, fleet)
            assert delay < ttl_s, f"run {run_id} was handed over only after {delay:.1f} s"
        entries = wait_until_done(client, trees.submitted, fleet)
        check_every_run(entries)
        assert len({e.owner for e in entries}) >= 1
    assert implement_overlap(entries) == cap
