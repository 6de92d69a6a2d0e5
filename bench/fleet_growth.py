"""The whole path at growing sizes: what one scheduler spends per item over the fleet.

``bench/fleet.py`` measures the whole path (a real run over a real ``pact worker``)
at one size, against plain Celery. This runs only the whole path, at each of
``--sizes`` (the items of a flat tree, contract and test suite per component), the
sizes alternating for ``--rounds`` rounds on one worker and one Redis, and prints per
size the median items/s and the scheduler's CPU per item (user and system: this
process, from the first dispatch to the last result), then the growth exponent of that
CPU between consecutive sizes, as ``bench/scale.py`` does for the simulated loop: 0
when an item costs the same in a run ten times larger, 1 when it costs ten times more.

    .venv/bin/python bench/fleet_growth.py                       # 1,000 and 10,000 items, ~3 min
    .venv/bin/python bench/fleet_growth.py --sizes 1000 5000 20000 --rounds 1
    .venv/bin/python bench/fleet_growth.py --dir ~/quiet --json  # the projects there, not in /tmp

Without --broker it starts a private redis-server on a free port (needs the binary).
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import shutil
import statistics
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.fleet import fleet_items, fleet_worker_command, whole_path_items  # noqa: E402
from bench.processes import Broker, given_redis, private_redis, worker  # noqa: E402
from bench.scale import growth_exponent  # noqa: E402


def rows_of(runs: dict[int, list[tuple[float, float, float]]]) -> list[dict[str, Any]]:
    """One row per size, from its rounds' (wall, user, system) seconds: medians, and
    the growth exponent of the CPU per item against the size before."""
    rows: list[dict[str, Any]] = []
    for size, measured in runs.items():
        wall = statistics.median(w for w, _, _ in measured)
        user = statistics.median(u for _, u, _ in measured)
        system = statistics.median(s for _, _, s in measured)
        rows.append(
            {
                "items": size,
                "rounds": len(measured),
                "wall_s_each": [round(w, 3) for w, _, _ in measured],
                "items_per_s": round(size / wall, 1),
                "cpu_ms_per_item": round((user + system) / size * 1000, 3),
                "user_ms_per_item": round(user / size * 1000, 3),
                "system_ms_per_item": round(system / size * 1000, 3),
            }
        )
    for before, after in itertools.pairwise(rows):
        exponent = growth_exponent(
            (before["items"], before["cpu_ms_per_item"]), (after["items"], after["cpu_ms_per_item"])
        )
        after["growth_exponent"] = round(exponent, 3)
    return rows


def add_fleet_options(parser: argparse.ArgumentParser) -> None:
    """The options of a bench that drives the whole path over its own worker."""
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--broker")
    parser.add_argument("--dir", help="where the runs' projects are made (see bench/fleet.py)")
    parser.add_argument("--json", action="store_true")


@contextlib.contextmanager
def whole_path_fleet(
    args: argparse.Namespace, warm_up: int, name: str
) -> Iterator[tuple[str, str]]:
    """A Redis (``--broker``, else a private one) and a warmed-up ``pact worker`` of
    ``--concurrency`` processes: yields the broker's URL and the directory the runs'
    projects go in, removed only at the end, as in bench/fleet.py (creating files is
    slow for minutes after a removal of many on some file systems)."""
    redis_: Broker
    with private_redis() if args.broker is None else given_redis(args.broker) as redis_:
        env = {**os.environ, "PACT_BROKER_URL": redis_.url, "PYTHONPATH": str(REPO)}
        logs = Path(tempfile.mkdtemp(prefix=f"bench-{name}-"))
        command = fleet_worker_command(redis_.url, args.concurrency)
        with worker(command, env, logs / "worker.log", REPO):
            fleet_items(redis_.url, min(100, warm_up))  # warm up the pool
            projects = tempfile.mkdtemp(prefix=f"bench-{name}-", dir=args.dir)
            try:
                yield redis_.url, projects
            finally:
                shutil.rmtree(projects, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--rounds", type=int, default=2, help="alternating rounds; medians")
    add_fleet_options(parser)
    args = parser.parse_args(argv)
    sizes = sorted(set(args.sizes))
    if sizes[0] < 4 or args.rounds < 1:
        parser.error("give sizes of at least 4 items and at least one round")
    # A flat tree of n // 2 components makes 2 * (n // 2) items: ask for even sizes.
    sizes = [2 * (size // 2) for size in sizes]

    runs: dict[int, list[tuple[float, float, float]]] = {size: [] for size in sizes}
    with whole_path_fleet(args, sizes[0], "growth") as (broker, projects):
        for _ in range(args.rounds):
            for size in sizes:
                runs[size].append(whole_path_items(broker, size, 4 * args.concurrency, projects))
    rows = rows_of(runs)
    if args.json:
        print(json.dumps({"concurrency": args.concurrency, "rows": rows}, indent=2))
        return 0
    print(f"{'items':>8} {'items/s':>8} {'cpu ms/it':>10} {'user':>6} {'system':>7} {'growth':>7}")
    for row in rows:
        growth = f"{row['growth_exponent']:7.2f}" if "growth_exponent" in row else " " * 7
        print(
            f"{row['items']:>8} {row['items_per_s']:>8} {row['cpu_ms_per_item']:>10.2f} "
            f"{row['user_ms_per_item']:>6.2f} {row['system_ms_per_item']:>7.2f} {growth}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
