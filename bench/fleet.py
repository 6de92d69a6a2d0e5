"""Fleet overhead against plain Celery, side by side in one run, on one Redis.

Pushes N no-op work items through the fleet — the scheduler side's dispatch
(fencing token, lease, ``send_task`` to the role queue), a real ``pact worker``
(message validation, the fencing check, a held lease, the noop agent, the
harness's contract check, outputs into the Redis artifact store, the done
marker, the result stream) and the scheduler reading and acknowledging each
result — then N plain Celery tasks (a task that returns its argument; results
through the Redis result backend) on a plain worker with the same pool and
concurrency. It prints throughput and per-item overhead (wall time / items x
concurrency) for both, and the scheduler's own bookkeeping per item (three
audit events each, fsynced, folded into the state) measured in-process.

Both workers run at once; the two kinds of batch alternate for ``--rounds`` rounds
and the medians are compared, so that load from elsewhere on the machine hits both.
The plain worker runs with task events on (-E), as the fleet's workers do.

The whole path (``whole_path_*``): a real run — the run loop with its audit log,
state, ready set, inputs and promotion — over the same fleet, on the contracts and
test suites of a flat tree (``--items`` of them), against plain Celery's per-item cost.

Usage: python bench/fleet.py [--items 2000] [--concurrency 4] [--rounds 3] [--broker URL]
                            [--dir DIR]
Without --broker it starts a private redis-server on a free port (needs the binary).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.processes import (  # noqa: E402
    Broker,
    cpu_per_item,
    given_redis,
    measured,
    private_redis,
    worker,
)
from pact_workers.fleet import keys  # noqa: E402
from pact_workers.models.work import ItemStatus, Phase, TaskMessage, Usage  # noqa: E402
from scheduler.audit import AuditLog  # noqa: E402
from scheduler.events import ArtifactsPromoted, ItemDispatched, ItemSucceeded, RunStarted  # noqa: E402
from scheduler.executors.celery import CeleryFleet  # noqa: E402
from scheduler.executors.packing import MAX_PACK  # noqa: E402
from scheduler.fold import apply, fold  # noqa: E402


def fleet_worker_command(broker: str, concurrency: int) -> list[str]:
    """A real ``pact worker`` for the roles the benchmarks' items take (prefork, events
    on, logging at INFO: ``bench.processes.worker`` waits for its ready line)."""
    return [sys.executable, "-m", "scheduler.cli", "worker", "--broker", broker,
            "--roles", "contract_author,test_author", "--pool", "prefork",
            "--concurrency", str(concurrency), "--loglevel", "INFO"]  # fmt: skip


def fleet_items(broker: str, items: int) -> float:
    run_id = f"bench{time.time_ns():x}"
    fleet = CeleryFleet(broker, stream=keys.run_results(run_id))
    try:
        started = time.perf_counter()
        for i in range(items):
            fleet.submit(
                TaskMessage(
                    run_id=run_id,
                    component_id=f"c{i}",
                    phase=Phase.CONTRACT,
                    attempt=1,
                    agent="noop",
                    timeout_s=60,
                )
            )
        received = 0
        while received < items:
            for result in fleet.read(1.0):
                if result.outcome != "ok":
                    raise SystemExit(f"fleet item failed: {result.error}")
                fleet.ack(result)
                received += 1
        return time.perf_counter() - started
    finally:
        fleet.close()


def whole_path_items(
    broker: str,
    items: int,
    capacity: int,
    where: str,
    packed: list[int] | None = None,
    max_pack: int = MAX_PACK,
    steps: list[tuple[int, int]] | None = None,
) -> tuple[float, float, float]:
    """The whole path: a real run (RunController: audit log with group commit, state,
    ready set, inputs, promotion) over the fleet, driving the contracts and the test
    suites of a flat tree of ``items // 2`` components (phased, so that it stops before
    any implementation, whose verification runs pytest), in a new project under
    ``where`` (left there: see main). Returns the seconds from the first dispatch to
    the last test suite accepted, and the CPU seconds (user, system) this process,
    the scheduler, spent meanwhile: less noisy than the wall time, which depends on
    how the machine shares its cores between the scheduler, the workers and Redis.
    The system time is mostly the file system's (a run writes about seven files per
    item), and varies with its state more than anything else here. ``packed``: gets
    the attempts that travelled in packs appended; ``max_pack`` 1 sends none (see
    scheduler.executors.packing). ``steps``: gets (loop steps, results) appended."""
    from pact_workers.models.tree import tree_from_data
    from scheduler.executors.celery_executor import CeleryExecutor
    from scheduler.launch import start_run
    from scheduler.project import ProjectDir
    from scheduler.run import RunController
    from scheduler.settings import Settings

    leaves = max(1, items // 2 - 1)
    nodes: dict[str, Any] = {
        "root": {"component_id": "root", "name": "root", "children": []},
    }
    for i in range(leaves):
        nodes[f"c{i}"] = {"component_id": f"c{i}", "name": f"c{i}", "parent_id": "root"}
        nodes["root"]["children"].append(f"c{i}")
    data = {"root_id": "root", "nodes": nodes}
    tree = tree_from_data(data, "<bench>")
    settings = Settings(scheduling="phased", cache="off")
    project = ProjectDir(Path(tempfile.mkdtemp(prefix="whole-", dir=where)))
    run_id = start_run(
        project, tree, tree_bytes=json.dumps(data).encode(), settings=settings, agent="noop"
    )
    executor = CeleryExecutor.single_run(broker, run_id, capacity=capacity, max_pack=max_pack)
    controller = RunController(
        project, executor=executor, store=_fleet_store(project, executor), settings=settings
    )
    # The items to drive, looked at in order: each turn skips past those done (the
    # scheduler's loop knows what is left; a scan of every item per turn would be the
    # benchmark's cost, not the scheduler's).
    wanted = [f"{cid}/{phase}" for phase in ("contract", "test") for cid in nodes]
    ended = {ItemStatus.FAILED, ItemStatus.POISONED, ItemStatus.CANCELLED, ItemStatus.SUSPENDED}
    controller.open()
    try:
        started, times = time.perf_counter(), os.times()
        first = turns = handled = 0
        results: list[Any] = [None]
        while True:
            items_of = controller.state.items
            while first < len(wanted) and items_of[wanted[first]].status is ItemStatus.DONE:
                first += 1
            if first == len(wanted):
                break
            if not results:  # an idle turn: is anything unable to finish?
                stuck = [k for k in wanted if items_of[k].status in ended]
                if stuck or controller.state.status.value != "active":
                    raise SystemExit(
                        f"whole path: run {controller.state.status.value}, "
                        f"{len(stuck)} items cannot finish ({', '.join(stuck[:5])})"
                    )
            controller.dispatch_ready()
            results = executor.poll(0.2)
            turns, handled = turns + 1, handled + len(results)
            controller.prefetch(results)
            for result in results:
                controller.handle(result)
            controller.tick(had_results=bool(results), commit=False)
        controller.journal.commit_all()
        wall, now = time.perf_counter() - started, os.times()
        if packed is not None:
            packed.append(executor.fleet.packer.packed_attempts)
        if steps is not None:
            steps.append((turns, handled))
        return wall, now.user - times.user, now.system - times.system
    finally:
        controller.close()
        executor.close()


def _fleet_store(project: Any, executor: Any) -> Any:
    from pact_workers.artifacts import ArtifactStore, DirectoryBlobStore
    from pact_workers.fleet.blobs import RedisBlobStore
    from pact_workers.fleet.tiered import TieredBlobStore

    return ArtifactStore(
        TieredBlobStore(
            DirectoryBlobStore(project.artifacts_dir, deferred=True),
            RedisBlobStore(executor.fleet.client),
            deferred=True,
        )
    )


def plain_items(broker: str, items: int) -> float:
    os.environ["PACT_BROKER_URL"] = broker
    sys.path.insert(0, str(REPO / "bench"))
    from plain_app import app

    started = time.perf_counter()
    pending = [
        app.send_task("bench.noop", args=[f"c{i}"], queue="bench.plain") for i in range(items)
    ]
    for result in pending:
        result.get(timeout=300)
        result.forget()
    return time.perf_counter() - started


def bookkeeping_s(items: int) -> float:
    """Scheduler-side cost per item: three audit events (fsynced) folded into the state."""
    from pact_workers.models.tree import tree_from_data

    nodes: dict[str, Any] = {
        "root": {
            "component_id": "root",
            "name": "root",
            "children": [f"c{i}" for i in range(items)],
        }
    }
    for i in range(items):
        nodes[f"c{i}"] = {"component_id": f"c{i}", "name": f"c{i}", "parent_id": "root"}
    tree = tree_from_data({"root_id": "root", "nodes": nodes}, "<bench>")
    with tempfile.TemporaryDirectory() as tmp, AuditLog(Path(tmp) / "audit.jsonl") as log:
        state = fold([log.append(RunStarted(run_id="b", tree=tree.model_dump(mode="json")))])
        started = time.perf_counter()
        for i in range(items):
            cid = f"c{i}"
            for event in (
                ItemDispatched(
                    component_id=cid, phase=Phase.CONTRACT, attempt=1, role="contract_author"
                ),
                ItemSucceeded(
                    component_id=cid,
                    phase=Phase.CONTRACT,
                    attempt=1,
                    output="sha256:" + "0" * 64,
                    usage=Usage(),
                ),
                ArtifactsPromoted(component_id=cid, phase=Phase.CONTRACT, paths=[]),
            ):
                apply(state, log.append(event))
        return time.perf_counter() - started


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds; medians")
    parser.add_argument("--broker")
    parser.add_argument("--json", action="store_true")
    parser.add_argument(
        "--max-pack",
        type=int,
        default=MAX_PACK,
        help="the most short attempts the whole path sends in one message (1: none "
        "packed, as before packs)",
    )
    parser.add_argument(
        "--dir",
        help="where the whole path's project directories are made (default: the "
        "temporary directory); its system CPU is mostly creating files, whose cost "
        "differs widely between file systems and after a removal of many files",
    )
    args = parser.parse_args(argv)

    redis_: Broker
    with private_redis() if args.broker is None else given_redis(args.broker) as redis_:
        broker = redis_.url
        env = {**os.environ, "PACT_BROKER_URL": broker, "PYTHONPATH": str(REPO)}
        logs = Path(tempfile.mkdtemp(prefix="bench-fleet-"))
        py = sys.executable
        c = str(args.concurrency)
        fleet_worker = fleet_worker_command(broker, args.concurrency)
        plain_worker = [py, "-m", "celery", "-A", "bench.plain_app", "worker",
                        "-Q", "bench.plain", "-P", "prefork", "-c", c, "-l", "INFO",
                        "-E"]  # fmt: skip
        with (
            worker(fleet_worker, env, logs / "fleet-worker.log", REPO) as fleet_pid,
            worker(plain_worker, env, logs / "plain-worker.log", REPO) as plain_pid,
        ):
            fleet_items(broker, min(100, args.items))  # warm up both pools
            plain_items(broker, min(100, args.items))
            # Alternate the two, so that load from elsewhere on the machine hits both.
            fleet_runs: list[float] = []
            plain_runs: list[float] = []
            whole_runs: list[float] = []
            packed: list[int] = []
            cpu: dict[str, list[dict[str, float]]] = {"fleet": [], "plain": [], "whole": []}
            # The whole path's projects are removed only at the end: on ext4 without a
            # journal, creating files is slow for minutes after a removal of many
            # (see bench/scale.py), which would slow each round more than the last.
            projects = tempfile.mkdtemp(prefix="bench-whole-", dir=args.dir)
            try:
                for _ in range(args.rounds):
                    wall, spent = measured(
                        lambda: fleet_items(broker, args.items), fleet_pid, redis_.pid
                    )
                    fleet_runs.append(wall)
                    cpu["fleet"].append(spent)
                    wall, spent = measured(
                        lambda: plain_items(broker, args.items), plain_pid, redis_.pid
                    )
                    plain_runs.append(wall)
                    cpu["plain"].append(spent)
                    (wall, user, system), spent = measured(
                        lambda: whole_path_items(
                            broker,
                            args.items,
                            4 * args.concurrency,
                            projects,
                            packed,
                            args.max_pack,
                        ),
                        fleet_pid,
                        redis_.pid,
                    )
                    whole_runs.append(wall)
                    # This process's share: from the first dispatch on, not the setup.
                    cpu["whole"].append({**spent, "user": user, "system": system})
            finally:
                shutil.rmtree(projects, ignore_errors=True)
    fleet_s, plain_s = statistics.median(fleet_runs), statistics.median(plain_runs)
    whole_s = statistics.median(whole_runs)
    whole_items = 2 * (max(1, args.items // 2 - 1) + 1)
    books_s = bookkeeping_s(args.items)
    per = {
        "fleet": fleet_s / args.items * args.concurrency,
        "plain": plain_s / args.items * args.concurrency,
    }
    cpu_ms = {
        "plain": cpu_per_item(cpu["plain"], args.items),
        "fleet": cpu_per_item(cpu["fleet"], args.items),
        "whole_path": cpu_per_item(cpu["whole"], whole_items),
    }
    scheduler_ms = cpu_ms["whole_path"]["user"] + cpu_ms["whole_path"]["system"]
    result = {
        "items": args.items,
        "concurrency": args.concurrency,
        "rounds": args.rounds,
        "fleet_s_each": [round(x, 3) for x in fleet_runs],
        "plain_celery_s_each": [round(x, 3) for x in plain_runs],
        "fleet_s": round(fleet_s, 3),
        "plain_celery_s": round(plain_s, 3),
        "fleet_items_per_s": round(args.items / fleet_s, 1),
        "plain_items_per_s": round(args.items / plain_s, 1),
        "fleet_overhead_ms_per_item": round(per["fleet"] * 1000, 2),
        "plain_overhead_ms_per_item": round(per["plain"] * 1000, 2),
        "overhead_ratio": round(per["fleet"] / per["plain"], 3),
        "target_ratio": 1.5,
        "scheduler_bookkeeping_ms_per_item": round(books_s / args.items * 1000, 3),
        "whole_path_items": whole_items,
        "whole_path_s_each": [round(x, 3) for x in whole_runs],
        "whole_path_scheduler_cpu_ms_per_item": round(scheduler_ms, 3),
        "whole_path_items_per_s": round(whole_items / whole_s, 1),
        # What one scheduler could push with the workers and Redis on other machines:
        # one CPU's worth of its own CPU per item.
        "whole_path_scheduler_ceiling_items_per_s": round(1000 / scheduler_ms, 1),
        "whole_path_overhead_ms_per_item": round(
            whole_s / whole_items * args.concurrency * 1000, 2
        ),
        "whole_path_ratio": round((whole_s / whole_items) / (plain_s / args.items), 3),
        # The share of the whole path's attempts sent several to a message (packs).
        "whole_path_packed_share": round(statistics.median(packed) / whole_items, 3),
        # CPU per item of each process (user and system: this one, the client or the
        # scheduler); with few cores, the wall-time ratios follow these totals.
        "cpu_ms_per_item": cpu_ms,
        "whole_path_cpu_ratio": round(cpu_ms["whole_path"]["total"] / cpu_ms["plain"]["total"], 3),
    }
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        for key, value in result.items():
            if key == "cpu_ms_per_item":
                for path, split in cpu_ms.items():
                    shown = ", ".join(f"{name} {ms}" for name, ms in split.items())
                    print(f"{'cpu_ms_per_item ' + path:36} {shown}")
                continue
            print(f"{key:36} {value}")
        verdict = "holds" if result["overhead_ratio"] <= 1.5 else "does NOT hold"
        print(f"target (fleet overhead <= 1.5x plain Celery's): {verdict}")
        verdict = "holds" if result["whole_path_ratio"] <= 1.5 else "does NOT hold"
        print(f"target (whole path <= 1.5x plain Celery's per item): {verdict}")
        verdict = "holds" if result["whole_path_items_per_s"] >= 1000 else "does NOT hold"
        print(f"target (one scheduler, whole path, >= 1,000 items/s): {verdict}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
