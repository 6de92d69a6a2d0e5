"""One scheduler's CPU on the whole path, split into what an item costs and what a loop step costs.

The run loop handles together the results that came in since its last step: one group
commit, one sync of the blobs, one round trip per kind of Redis command, one publish of
the packs. So a step has a cost of its own, whatever number of results it handles, and
each result adds its own (its events, its files, its promotion, its next dispatch).

This runs the whole path of ``bench/fleet.py`` (a real run over a real ``pact worker``,
a flat tree, contract and test suite per component) at each of ``--slots`` (attempts in
flight: the more, the more results a step finds), alternating for ``--rounds`` rounds,
and counts each run's loop steps and results. A run's CPU is ``per_step * steps +
per_item * results``, so its CPU per step is ``per_step + per_item * (results per
step)``: the least-squares line through every run's (results per step, CPU per step)
gives both. However large the batches, an item costs at least ``per_item``, so one
scheduler cannot pass ``1000 / per_item`` items/s on a CPU of its own.

    .venv/bin/python bench/batching.py                    # 3,000 items at 16 and 64 slots, ~1 min
    .venv/bin/python bench/batching.py --slots 16 64 256 --rounds 3 --dir /dev/shm

Without --broker it starts a private redis-server on a free port (needs the binary).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.fleet import whole_path_items  # noqa: E402
from bench.fleet_growth import add_fleet_options, whole_path_fleet  # noqa: E402


def fit_line(points: list[tuple[float, float]]) -> tuple[float, float] | None:
    """The least-squares line through ``points`` as (intercept, slope); None when the
    points do not tell a slope (fewer than two distinct x)."""
    xs = [x for x, _ in points]
    if len(set(xs)) < 2:
        return None
    mean_x = statistics.fmean(xs)
    mean_y = statistics.fmean(y for _, y in points)
    sxx = sum((x - mean_x) ** 2 for x in xs)
    sxy = sum((x - mean_x) * (y - mean_y) for x, y in points)
    slope = sxy / sxx
    return mean_y - slope * mean_x, slope


def run_row(
    slots: int, results: int, wall: float, user: float, system: float, steps: int
) -> dict[str, Any]:
    """One run's figures: per item (each of a no-op run's items is one result), per
    step, and results per step."""
    cpu_ms = (user + system) * 1000
    return {
        "slots": slots,
        "items_per_s": round(results / wall, 1),
        "cpu_ms_per_item": round(cpu_ms / results, 3),
        "steps": steps,
        "results": results,
        "results_per_step": round(results / steps, 2),
        "cpu_ms_per_step": round(cpu_ms / steps, 3),
    }


def summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Medians per slot count, and the line through every run."""
    rows = []
    for slots in sorted({r["slots"] for r in runs}):
        mine = [r for r in runs if r["slots"] == slots]
        row: dict[str, Any] = {"slots": slots, "rounds": len(mine)}
        for key in ("items_per_s", "cpu_ms_per_item", "results_per_step", "cpu_ms_per_step"):
            row[key] = round(statistics.median(r[key] for r in mine), 3)
        rows.append(row)
    line = fit_line([(r["results_per_step"], r["cpu_ms_per_step"]) for r in runs])
    fit: dict[str, Any] = dict.fromkeys(
        ("cpu_ms_per_step", "cpu_ms_per_item", "ceiling_items_per_s")
    )
    if line is not None:
        per_step, per_item = line
        fit["cpu_ms_per_step"], fit["cpu_ms_per_item"] = round(per_step, 3), round(per_item, 3)
        if per_item > 0:
            fit["ceiling_items_per_s"] = round(1000 / per_item, 1)
    return {"rows": rows, "runs": runs, "fit": fit}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=3000)
    parser.add_argument("--slots", type=int, nargs="+", default=[16, 64])
    parser.add_argument("--rounds", type=int, default=2, help="alternating rounds")
    add_fleet_options(parser)
    args = parser.parse_args(argv)
    slot_counts = sorted(set(args.slots))
    if args.items < 4 or args.rounds < 1 or slot_counts[0] < 1:
        parser.error("give at least 4 items, one round and one slot")

    runs: list[dict[str, Any]] = []
    with whole_path_fleet(args, args.items, "batching") as (broker, projects):
        for _ in range(args.rounds):
            for slots in slot_counts:
                steps: list[tuple[int, int]] = []
                wall, user, system = whole_path_items(
                    broker, args.items, slots, projects, steps=steps
                )
                turns, results = steps[0]
                runs.append(run_row(slots, results, wall, user, system, turns))
    found = {"items": args.items, "concurrency": args.concurrency, **summary(runs)}
    if args.json:
        print(json.dumps(found, indent=2))
        return 0
    print(f"{'slots':>6} {'items/s':>8} {'cpu ms/it':>10} {'results/step':>13} {'cpu ms/step':>12}")
    for row in found["rows"]:
        print(
            f"{row['slots']:>6} {row['items_per_s']:>8.1f} {row['cpu_ms_per_item']:>10.3f} "
            f"{row['results_per_step']:>13.2f} {row['cpu_ms_per_step']:>12.3f}"
        )
    fit = found["fit"]
    if fit["cpu_ms_per_item"] is None:
        print("every run had the same results per step: no line (give other --slots)")
        return 0
    print(
        f"line through the {len(runs)} runs: {fit['cpu_ms_per_step']} ms per step + "
        f"{fit['cpu_ms_per_item']} ms per item"
    )
    if fit["ceiling_items_per_s"] is not None:
        print(f"one scheduler's ceiling at any batch size: {fit['ceiling_items_per_s']} items/s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
