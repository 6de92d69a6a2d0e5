"""Fault injection on a real fleet: real redis-server, real ``pact worker`` processes.

The bundled example runs with ``pact run --executor celery`` while workers, the
scheduler and Redis itself are killed or restarted under it. Every run must still
complete with each item applied exactly once, and the audit log must account for every
attempt. Nothing here uses Celery's eager mode.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import statistics
import subprocess
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import pytest
import redis
import yaml

from pact_workers.app import VISIBILITY_TIMEOUT_S
from pact_workers.fleet import keys
from pact_workers.fleet.leases import RUNNING
from pact_workers.models.work import IN_FLIGHT, Phase
from scheduler.audit import read_events
from scheduler.events import (
    Event,
    ItemDispatched,
    ItemFailed,
    ItemSucceeded,
    ResultDropped,
    RunStarted,
)
from scheduler.executors.messages import CLAIM_GRACE_S
from scheduler.fold import fold
from scheduler.policy import STALLED, WORKER_LOST
from scheduler.project import ProjectDir
from scheduler.state import INTERRUPTED
from tests.acceptance.test_crash import check_applied_once
from tests.integration.conftest import RedisServer
from tests.integration.fleet import Fleet, Proc, pact_argv, tail

KILLS = int(os.environ.get("PACT_FLEET_KILLS", "10"))
SEED = int(os.environ.get("PACT_FLEET_SEED", "20261122"))

AUTHOR_ROLES = ("contract_author", "test_author")
CODE_ROLES = ("code_author", "integrator")
#: Lease TTL of the code workers that get killed: a dead one is noticed within this.
KILLED_LEASE_TTL_S = 3.0
#: A recovery must take less than this: 3 lease TTLs, or the claim grace of a message
#: the worker took and died before claiming (CLAIM_GRACE_S), plus polling and the
#: retry's backoff; 80 times below the broker's own redelivery (the visibility timeout).
RECOVERY_BOUND_S = 30.0
#: Generous bounds on one run of the example (about 9 s on a healthy fleet).
RUN_TIMEOUT_S = 180.0
#: A run whose worker was killed: the example plus one recovery takes about 15 s.
KILLED_RUN_TIMEOUT_S = 90.0
WAIT_TIMEOUT_S = 120.0
#: Items of the example: 10 contracts, 10 test suites, 6 implementations, 4 integrations.
ITEMS = 30


# --------------------------------------------------------------------------- helpers


def run_args(
    example: Path, project: Path, broker_url: str, *, replay: Path | None = None
) -> list[str]:
    return [
        "run",
        str(example / "tree.json"),
        "--project",
        str(project),
        "--replay-dir",
        str(replay or example / "replay"),
        "--executor",
        "celery",
        "--broker",
        broker_url,
        "--workers",
        "4",
    ]


#: What the replay agent waits before answering an implementer, so that a kill a random
#: moment (up to 0.8 s) into an attempt lands while it runs, however fast verification is.
IMPLEMENTER_LATENCY_S = 1.0


def slow_implementations(example: Path, tmp_path: Path) -> Path:
    """A copy of the example's replay directory whose implementers take a second."""
    replay = tmp_path / "replay"
    shutil.copytree(example / "replay", replay)
    script = yaml.safe_load((replay / "replay.yaml").read_text())
    script["latency_s"] = {
        "code_author": IMPLEMENTER_LATENCY_S,
        "integrator": IMPLEMENTER_LATENCY_S,
    }
    (replay / "replay.yaml").write_text(yaml.safe_dump(script))
    return replay


@contextmanager
def redis_client(url: str) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(url, socket_timeout=10)
    try:
        yield client
    finally:
        client.close()


def audit_events(project: Path) -> list[Event]:
    """The events logged so far (a line being written is skipped)."""
    path = ProjectDir(project).audit_path
    if not path.exists():
        return []
    return read_events(path)[0]


def wait_for(
    what: str,
    check: Callable[[], bool],
    *,
    fleet: Fleet,
    run: Proc | None = None,
    timeout_s: float = WAIT_TIMEOUT_S,
    interval_s: float = 0.02,
) -> None:
    """Poll ``check`` until true; fail with every log if it times out or ``run`` exits."""
    deadline = time.monotonic() + timeout_s
    while not check():
        if run is not None and not run.running():
            pytest.fail(f"{run.name} exited ({run.returncode}) before {what}\n{fleet.logs()}")
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout_s:.0f} s waiting for {what}\n{fleet.logs()}")
        time.sleep(interval_s)


def wait_for_run_id(project: Path, *, fleet: Fleet, run: Proc) -> str:
    found: list[str] = []

    def started() -> bool:
        found.extend(e.run_id for e in audit_events(project) if isinstance(e, RunStarted))
        return bool(found)

    wait_for(f"the run_started event in {project}", started, fleet=fleet, run=run)
    return found[0]


def succeeded(project: Path) -> int:
    return sum(isinstance(e, ItemSucceeded) for e in audit_events(project))


AttemptKey = tuple[str, Phase, int]


def running_attempts(client: redis.Redis, run_id: str, phases: Iterable[Phase]) -> list[AttemptKey]:
    """Attempts of ``run_id`` in ``phases`` whose lease says a worker is running them."""
    wanted = {p.value for p in phases}
    found = sorted(client.scan_iter(match=f"{keys.PREFIX}lease:{run_id}:*", count=1000))
    if not found:
        return []
    attempts = []
    for key, value in zip(found, client.mget(found), strict=True):
        _, _, _, component, phase, attempt = key.decode().split(":")
        if phase in wanted and isinstance(value, bytes) and value.startswith(RUNNING):
            attempts.append((component, Phase(phase), int(attempt)))
    return attempts


def wait_for_running(
    client: redis.Redis,
    run_id: str,
    phases: Iterable[Phase],
    *,
    fleet: Fleet,
    run: Proc,
) -> AttemptKey:
    """Wait until a worker runs an attempt of ``phases``; return one such attempt."""
    found: list[AttemptKey] = []
    wanted = tuple(phases)

    def some() -> bool:
        found[:] = running_attempts(client, run_id, wanted)
        return bool(found)

    wait_for(f"a running {'/'.join(wanted)} attempt", some, fleet=fleet, run=run)
    return found[0]


def wait_for_nth_start(
    client: redis.Redis,
    run_id: str,
    phases: Iterable[Phase],
    n: int,
    *,
    fleet: Fleet,
    run: Proc,
) -> AttemptKey:
    """Watch the run's leases from its start; return the ``n``-th attempt of ``phases``
    seen running (within one poll of the moment its worker took its lease)."""
    seen: list[AttemptKey] = []
    wanted = tuple(phases)

    def started() -> bool:
        for attempt in running_attempts(client, run_id, wanted):
            if attempt not in seen:
                seen.append(attempt)
        return len(seen) >= n

    wait_for(f"{n} {'/'.join(wanted)} attempts to start", started, fleet=fleet, run=run)
    return seen[n - 1]


def ts(event: Event) -> float:
    return datetime.fromisoformat(event.ts).timestamp()


def attempt_of(event: ItemDispatched | ItemFailed | ItemSucceeded | ResultDropped) -> AttemptKey:
    return (event.component_id, event.phase, event.attempt)


def resume_to_completion(
    fleet: Fleet, project: Path, broker_url: str, client: redis.Redis
) -> list[Event]:
    """``pact resume`` the fleet run in ``project``; once it completed, check that
    nothing was applied twice and every attempt is accounted for; its events."""
    resumed = fleet.pact(
        "resume", str(project), "--executor", "celery", "--broker", broker_url, name="resume"
    )
    code = fleet.wait(resumed, RUN_TIMEOUT_S, lambda: diagnose(client, project))
    assert code == 0, fleet.logs()
    check_applied_once(project)
    events = audit_events(project)
    check_every_attempt_accounted(events)
    check_status_completed(project)
    return events


def check_status_completed(project: Path) -> None:
    done = subprocess.run(
        pact_argv("status", str(project), "--json"),
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "COLUMNS": "200", "NO_COLOR": "1"},
    )
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["status"] == "completed", doc
    assert doc["items"] == {"done": ITEMS}, doc["items"]
    assert doc["inconsistencies"] == [] and doc["warnings"] == [], doc


def check_every_attempt_accounted(events: Sequence[Event]) -> None:
    """Every dispatched attempt succeeded, failed with a logged reason, had its result
    dropped with a reason, or was superseded by a later attempt of the same item; and a
    result for an attempt that was no longer current never became a second success."""
    outcome: dict[AttemptKey, list[Event]] = {}
    for e in events:
        if isinstance(e, ItemSucceeded | ItemFailed | ResultDropped):
            outcome.setdefault(attempt_of(e), []).append(e)
    latest: dict[tuple[str, Phase], int] = {}
    for e in events:
        if isinstance(e, ItemDispatched):
            latest[(e.component_id, e.phase)] = max(
                e.attempt, latest.get((e.component_id, e.phase), 0)
            )
    for e in events:
        if not isinstance(e, ItemDispatched):
            continue
        key = attempt_of(e)
        found = outcome.get(key, [])
        superseded = latest[(e.component_id, e.phase)] > e.attempt
        assert found or superseded, f"attempt {key} was dispatched and never accounted for"
        for o in found:
            if isinstance(o, ItemFailed):
                assert o.error_type and o.error, f"attempt {key} failed without a reason: {o}"
            if isinstance(o, ResultDropped):
                assert o.reason, f"result of {key} dropped without a reason"
        applied = [o for o in found if isinstance(o, ItemSucceeded | ItemFailed)]
        assert len(applied) <= 1, f"attempt {key} was applied twice: {applied}"
    # A dropped result is never also a success of that attempt logged after it.
    for key, found in outcome.items():
        kinds = [type(o).__name__ for o in found]
        if "ResultDropped" in kinds and "ItemSucceeded" in kinds:
            first_drop = kinds.index("ResultDropped")
            assert "ItemSucceeded" not in kinds[first_drop:], f"{key}: {kinds}"


def stream_backlog(client: redis.Redis, run_id: str) -> tuple[int, int]:
    """(entries delivered to the scheduler but not acknowledged, entries not delivered)
    on the run's result stream."""
    stream = keys.run_results(run_id)
    groups = [{k: _text(v) for k, v in g.items()} for g in client.xinfo_groups(stream)]
    group = next(g for g in groups if g["name"] == keys.RESULTS_GROUP)
    undelivered = client.xrange(stream, min=f"({group['last-delivered-id']}") or []
    return int(group["pending"]), len(undelivered)


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def diagnose(client: redis.Redis, project: Path) -> str:
    """What a stuck run waits for: its in-flight attempts and their keys in Redis."""
    events = audit_events(project)
    state = fold(events)
    lines = [f"in flight in {project} (run {state.run_id}), with their keys in Redis:"]
    try:
        for item in state.in_flight():
            c, p, n = item.component_id, item.phase.value, item.attempt
            lease_key = keys.lease(state.run_id, c, p, n)
            lease, ttl_ms = client.get(lease_key), client.pttl(lease_key)
            done = bool(client.exists(keys.done(state.run_id, c, p, n)))
            lines.append(
                f"  {c}/{p}#{n}: lease {lease!r} (expires in {ttl_ms / 1000:.0f} s), "
                f"done marker {'set' if done else 'absent'}"
            )
        lines.append(
            f"celery messages taken by a worker and not acknowledged ('unacked'): "
            f"{client.hlen('unacked')}"
        )
    except redis.RedisError as exc:
        lines.append(f"  (Redis unreadable: {exc})")
    return "\n".join(lines)


def worker_tasks(worker: Proc) -> set[str]:
    """The task names a worker's log says it received."""
    names = set()
    for line in worker.log.read_text(errors="replace").splitlines():
        if "] received" in line and "Task " in line:
            names.add(line.split("Task ", 1)[1].split("[", 1)[0])
    return names


# ----------------------------------------------------------------------------- tests


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_example_runs_on_two_workers_with_different_roles(
    redis_url: str, example: Path, tmp_path: Path
) -> None:
    project = tmp_path / "project"
    with Fleet(redis_url, tmp_path / "logs") as fleet:
        authors = fleet.worker("authors", roles=AUTHOR_ROLES, concurrency=2)
        coders = fleet.worker("coders", roles=CODE_ROLES, concurrency=2)
        run = fleet.pact(*run_args(example, project, redis_url), name="run")
        with redis_client(redis_url) as client:
            code = fleet.wait(run, RUN_TIMEOUT_S, lambda: diagnose(client, project))
        assert code == 0, fleet.logs()

        check_applied_once(project)
        check_every_attempt_accounted(audit_events(project))
        check_status_completed(project)
        # Each worker took only the queues of its roles.
        assert worker_tasks(authors) == {"pact.contract_author", "pact.test_author"}, tail(
            authors.log
        )
        assert worker_tasks(coders) == {"pact.code_author", "pact.integrator"}, tail(coders.log)


@dataclass
class Kill:
    iteration: int
    target: AttemptKey
    killed_at: float
    hit: bool
    #: Each lost attempt, how long until its next attempt was dispatched, and why lost.
    recoveries: list[tuple[AttemptKey, float, str]]


@pytest.mark.slow
@pytest.mark.timeout(120 + 60 * KILLS)
def test_worker_killed_mid_implementation_ten_times(
    redis_url: str, example: Path, tmp_path: Path
) -> None:
    rng = random.Random(SEED)
    kills: list[Kill] = []
    replay = slow_implementations(example, tmp_path)
    with Fleet(redis_url, tmp_path / "logs") as fleet, redis_client(redis_url) as client:
        authors = fleet.worker("authors", roles=AUTHOR_ROLES, concurrency=2)
        # One coder at a time: each iteration kills it, and its replacement is the coder
        # the next iteration kills.
        coder = fleet.worker(
            "coder0", roles=CODE_ROLES, concurrency=2, lease_ttl_s=KILLED_LEASE_TTL_S
        )
        for i in range(KILLS):
            project = tmp_path / f"run{i}"
            run = fleet.pact(*run_args(example, project, redis_url, replay=replay), name=f"run{i}")
            run_id = wait_for_run_id(project, fleet=fleet, run=run)
            # Kill a random moment into the n-th implementation or integration attempt
            # (the example runs 7 and 4, each for a second or more: slow_implementations).
            target = wait_for_nth_start(
                client,
                run_id,
                (Phase.IMPLEMENT, Phase.INTEGRATE),
                rng.randint(1, 10),
                fleet=fleet,
                run=run,
            )
            time.sleep(rng.uniform(0.0, 0.8))
            killed_at = coder.lose()
            replacement = fleet.worker(
                f"coder{i + 1}",
                roles=CODE_ROLES,
                concurrency=2,
                lease_ttl_s=KILLED_LEASE_TTL_S,
            )
            procs = (authors, coder, replacement, run)
            context = f"iteration {i}, killed while {target} ran"

            def stuck(c: str = context, p: Path = project) -> str:
                return f"{c}\n{diagnose(client, p)}"

            code = fleet.wait(run, KILLED_RUN_TIMEOUT_S, stuck)
            context += f"\n{fleet.logs(*procs)}"
            assert code == 0, context

            check_applied_once(project)
            events = audit_events(project)
            check_every_attempt_accounted(events)
            lost = [e for e in events if isinstance(e, ItemFailed) and e.error_type == WORKER_LOST]
            lost_attempts = {attempt_of(e) for e in lost}
            hit = target in lost_attempts
            if not hit:
                # The target finished before the kill: its worker published its result
                # (the done marker is set only by the worker that publishes).
                assert client.exists(keys.done(run_id, target[0], target[1].value, target[2])), (
                    f"{target} was neither lost nor finished: {context}"
                )
                outcomes = [
                    e
                    for e in events
                    if isinstance(e, ItemSucceeded | ItemFailed) and attempt_of(e) == target
                ]
                assert len(outcomes) == 1, context
            recoveries = []
            for e in lost:
                assert ts(e) >= killed_at - 0.01, f"a worker was lost before the kill: {context}"
                nxt = [
                    d
                    for d in events
                    if isinstance(d, ItemDispatched)
                    and (d.component_id, d.phase, d.attempt)
                    == (e.component_id, e.phase, e.attempt + 1)
                ]
                assert len(nxt) == 1, f"no replacement of {attempt_of(e)}: {context}"
                recovery_s = ts(nxt[0]) - killed_at
                assert 0 < recovery_s < RECOVERY_BOUND_S, (
                    f"{attempt_of(e)} was dispatched again {recovery_s:.1f} s after the kill "
                    f"(bound {RECOVERY_BOUND_S} s; {e.error}): {context}"
                )
                recoveries.append((attempt_of(e), recovery_s, e.error))
            kills.append(Kill(i, target, killed_at, hit, recoveries))
            print(
                f"kill {i}: target {target[0]}/{target[1].value}#{target[2]} "
                f"{'hit' if hit else 'had finished'}; recoveries "
                + (
                    ", ".join(f"{c}/{p.value}#{a}: {s:.2f} s" for (c, p, a), s, _ in recoveries)
                    or "-"
                )
                + "".join(f"\n  {why}" for why in sorted({why for *_, why in recoveries}))
            )
            coder = replacement

    times = [s for k in kills for _, s, _ in k.recoveries]
    hits = sum(k.hit for k in kills)
    print(
        f"\nworker loss recovery over {KILLS} kills ({hits} hit a running attempt, "
        f"{len(times)} attempts lost): "
        + (
            f"median {statistics.median(times):.2f} s, max {max(times):.2f} s, "
            f"min {min(times):.2f} s; the broker alone would redeliver after "
            f"{VISIBILITY_TIMEOUT_S} s"
            if times
            else "no attempt was lost"
        )
    )
    assert hits >= KILLS * 7 // 10, f"only {hits} of {KILLS} kills hit a running attempt"
    assert RECOVERY_BOUND_S * 80 <= VISIBILITY_TIMEOUT_S
    assert CLAIM_GRACE_S <= RECOVERY_BOUND_S / 2


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_scheduler_killed_mid_run_resumes_from_the_stream(
    redis_url: str, example: Path, tmp_path: Path
) -> None:
    rng = random.Random(SEED + 3)
    project = tmp_path / "project"
    with Fleet(redis_url, tmp_path / "logs") as fleet, redis_client(redis_url) as client:
        fleet.worker("authors", roles=AUTHOR_ROLES, concurrency=2)
        fleet.worker("coders", roles=CODE_ROLES, concurrency=2)
        # Implementations take a second, so that the run still goes on after the wait
        # below, however fast the rest of it is.
        replay = slow_implementations(example, tmp_path)
        run = fleet.pact(*run_args(example, project, redis_url, replay=replay), name="run")
        run_id = wait_for_run_id(project, fleet=fleet, run=run)
        wait_for("5 items to succeed", lambda: succeeded(project) >= 5, fleet=fleet, run=run)
        time.sleep(rng.uniform(0.0, 2.0))
        # Kill it while some attempt runs, so that a result comes while no scheduler does.
        wait_for_running(client, run_id, list(Phase), fleet=fleet, run=run)
        run.lose()
        assert run.returncode == -signal.SIGKILL, fleet.logs()
        before = audit_events(project)
        in_flight = [
            (i.component_id, i.phase, i.attempt)
            for i in fold(before).items.values()
            if i.status in IN_FLIGHT
        ]
        assert in_flight, f"nothing was in flight when the scheduler died\n{fleet.logs()}"

        time.sleep(3.0)  # the workers go on publishing results with no scheduler
        pending, undelivered = stream_backlog(client, run_id)
        assert pending + undelivered >= 1, "no result waited in the stream for the resume"
        # Attempts the dead scheduler sent (a lease or a done marker exists) must come
        # back from the stream, not be run again.
        sent = {
            (c, p, n)
            for c, p, n in in_flight
            if client.exists(keys.lease(run_id, c, p.value, n), keys.done(run_id, c, p.value, n))
        }
        events = resume_to_completion(fleet, project, redis_url, client)
        for attempt in sent:
            outcomes = [
                e
                for e in events
                if isinstance(e, ItemSucceeded | ItemFailed) and attempt_of(e) == attempt
            ]
            assert len(outcomes) == 1, f"{attempt}: {outcomes}"
            assert not (
                isinstance(outcomes[0], ItemFailed)
                and outcomes[0].error_type in {WORKER_LOST, STALLED, INTERRUPTED}
            ), f"{attempt} in flight at the kill was not applied from the stream: {outcomes[0]}"
        # Every result in the stream was applied (or dropped, logged) and acknowledged.
        assert stream_backlog(client, run_id) == (0, 0)
        dropped = [e for e in events if isinstance(e, ResultDropped)]
        print(
            f"\nscheduler killed with {len(in_flight)} attempts in flight; "
            f"{pending + undelivered} results waited in the stream ({pending} delivered to the "
            f"dead scheduler, {undelivered} not yet read); {len(dropped)} dropped as stale"
        )


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_redis_restart_mid_run(private_redis: RedisServer, example: Path, tmp_path: Path) -> None:
    url = private_redis.url
    project = tmp_path / "project"
    with Fleet(url, tmp_path / "logs") as fleet, redis_client(url) as client:
        fleet.worker("authors", roles=AUTHOR_ROLES, concurrency=2, lease_ttl_s=3)
        fleet.worker("coders", roles=CODE_ROLES, concurrency=2, lease_ttl_s=3)
        run = fleet.pact(*run_args(example, project, url), name="run")
        run_id = wait_for_run_id(project, fleet=fleet, run=run)
        wait_for("5 items to succeed", lambda: succeeded(project) >= 5, fleet=fleet, run=run)
        wait_for_running(client, run_id, (Phase.IMPLEMENT, Phase.INTEGRATE), fleet=fleet, run=run)
        down_at = time.monotonic()
        private_redis.restart()
        downtime = time.monotonic() - down_at
        code = fleet.wait(
            run,
            240.0,
            lambda: f"{diagnose(client, project)}\n--- redis ---\n{tail(private_redis.log)}",
        )
        assert code == 0, f"{fleet.logs()}\n--- redis ---\n{tail(private_redis.log)}"
        check_applied_once(project)
        events = audit_events(project)
        check_every_attempt_accounted(events)
        failures = Counter(e.error_type for e in events if isinstance(e, ItemFailed))
        print(f"\nredis restarted in {downtime:.2f} s mid-run; failed attempts: {dict(failures)}")
