"""Scheduling benchmark: wavefront against phased on the real stigmergy tree.

Runs the real :class:`~scheduler.run.RunController` (audit log, state fold,
inputs, promotion) over a :class:`~scheduler.executors.simulated.SimulatedExecutor`
on a virtual clock, for several worker counts, both scheduling modes and
several latency seeds, and compares each makespan with a lower bound. The
makespans are virtual seconds, so they are exact and reproducible; only the
wall time column is a measurement.

Usage::

    python bench/scheduling.py [--json] [--seeds 1 2 3] [--workers 2 4 8] [--check]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from pact_workers.models.tree import DecompositionTree, load_tree
from pact_workers.models.work import ItemStatus
from scheduler.executors.simulated import (
    Latency,
    SimulatedExecutor,
    TaskSpan,
    VirtualClock,
    critical_path_s,
    lower_bound_s,
    stigmergy_like_latency,
    total_work_s,
)
from scheduler.launch import start_run
from scheduler.project import ProjectDir
from scheduler.run import RunController
from scheduler.settings import Settings
from scheduler.state import RunStatus
from scheduler.wavefront import SchedulingMode, WorkGraph

REPO = Path(__file__).resolve().parent.parent
STIGMERGY = REPO / "tests" / "data" / "real" / "stigmergy"

WORKERS = (2, 4, 8)
SEEDS = (1, 2, 3)
#: Targets: wavefront at least 30% faster than phased, and within 10% of the lower bound.
MAX_WAVEFRONT_OVER_PHASED = 0.70
MAX_WAVEFRONT_OVER_BOUND = 1.10

HOUR_S = 3600.0


@dataclass(frozen=True)
class SimulatedRun:
    """One run of the real run loop on the simulated executor."""

    workers: int
    mode: str
    seed: int
    makespan_s: float
    wall_s: float
    completed: bool
    #: Fraction of worker-seconds spent on attempts (1.0: no worker ever idle).
    utilisation: float
    spans: tuple[TaskSpan, ...]


@dataclass(frozen=True)
class Comparison:
    """Phased and wavefront at one worker count and seed, against the lower bound."""

    workers: int
    seed: int
    phased_s: float
    wavefront_s: float
    lower_bound_s: float
    critical_path_s: float
    total_work_s: float
    phased_wall_s: float
    wavefront_wall_s: float
    phased_utilisation: float
    wavefront_utilisation: float
    completed: bool

    @property
    def over_phased(self) -> float:
        return self.wavefront_s / self.phased_s

    @property
    def over_bound(self) -> float:
        return self.wavefront_s / self.lower_bound_s

    @property
    def faster_target_holds(self) -> bool:
        return self.over_phased <= MAX_WAVEFRONT_OVER_PHASED

    @property
    def bound_target_holds(self) -> bool:
        return self.over_bound <= MAX_WAVEFRONT_OVER_BOUND

    def as_json(self) -> dict[str, object]:
        return {
            **asdict(self),
            "wavefront_over_phased": self.over_phased,
            "wavefront_over_lower_bound": self.over_bound,
            "faster_target_holds": self.faster_target_holds,
            "bound_target_holds": self.bound_target_holds,
        }


def load_stigmergy(data_dir: Path = STIGMERGY) -> tuple[DecompositionTree, dict[str, list[str]]]:
    """The stigmergy tree with the internal dependencies its published contracts declare."""
    deps = json.loads((data_dir / "dependencies.json").read_text(encoding="utf-8"))
    internal: dict[str, list[str]] = deps["internal"]
    tree = load_tree(data_dir / "decomposition" / "tree.json").with_dependencies(internal)
    return tree, internal


def simulate(
    tree: DecompositionTree,
    *,
    workers: int,
    mode: SchedulingMode,
    latency: Latency,
    dependencies: dict[str, list[str]],
    seed: int = 0,
) -> SimulatedRun:
    """Run the real run loop over the tree in a fresh temporary project directory."""
    with tempfile.TemporaryDirectory(prefix="pact-bench-") as tmp:
        project = ProjectDir(Path(tmp))
        settings = Settings(scheduling=mode)
        started_s = time.perf_counter()
        start_run(project, tree, tree_bytes=tree.model_dump_json().encode(), settings=settings)
        clock = VirtualClock()
        store = project.store()
        executor = SimulatedExecutor(
            workers=workers,
            store=store,
            clock=clock,
            latency=latency,
            dependencies=dependencies,
        )
        try:
            state = RunController(
                project,
                executor=executor,
                store=store,
                settings=settings,
                clock=clock,
                sleep=clock.sleep,
            ).drive()
        finally:
            executor.close()
        wall_s = time.perf_counter() - started_s
    expected = len(WorkGraph(tree).keys)
    completed = (
        state.status is RunStatus.COMPLETED
        and len(state.items) == expected
        and all(i.status is ItemStatus.DONE for i in state.items.values())
    )
    makespan_s = clock.now()
    busy_s = sum(s.end_s - s.start_s for s in executor.spans)
    return SimulatedRun(
        workers=workers,
        mode=mode.value,
        seed=seed,
        makespan_s=makespan_s,
        wall_s=wall_s,
        completed=completed,
        utilisation=busy_s / (workers * makespan_s) if makespan_s else 1.0,
        spans=tuple(executor.spans),
    )


def compare(
    tree: DecompositionTree, dependencies: dict[str, list[str]], *, workers: int, seed: int
) -> Comparison:
    """Phased and wavefront runs with the same latencies, and the bound they share."""
    latency = stigmergy_like_latency(seed)
    runs = {
        mode: simulate(
            tree,
            workers=workers,
            mode=mode,
            latency=latency,
            dependencies=dependencies,
            seed=seed,
        )
        for mode in (SchedulingMode.PHASED, SchedulingMode.WAVEFRONT)
    }
    graph = WorkGraph(tree)
    phased, wavefront = runs[SchedulingMode.PHASED], runs[SchedulingMode.WAVEFRONT]
    return Comparison(
        workers=workers,
        seed=seed,
        phased_s=phased.makespan_s,
        wavefront_s=wavefront.makespan_s,
        lower_bound_s=lower_bound_s(graph, latency, workers),
        critical_path_s=critical_path_s(graph, latency),
        total_work_s=total_work_s(graph, latency),
        phased_wall_s=phased.wall_s,
        wavefront_wall_s=wavefront.wall_s,
        phased_utilisation=phased.utilisation,
        wavefront_utilisation=wavefront.utilisation,
        completed=phased.completed and wavefront.completed,
    )


def run_benchmark(
    *, workers: Sequence[int] = WORKERS, seeds: Sequence[int] = SEEDS, data_dir: Path = STIGMERGY
) -> list[Comparison]:
    """Every (workers, seed) comparison on the stigmergy tree."""
    tree, dependencies = load_stigmergy(data_dir)
    return [compare(tree, dependencies, workers=w, seed=s) for w in workers for s in seeds]


def summarise(rows: Sequence[Comparison]) -> list[dict[str, object]]:
    """Min, mean and max of both ratios per worker count, and whether the targets hold."""
    out: list[dict[str, object]] = []
    for workers in sorted({r.workers for r in rows}):
        group = [r for r in rows if r.workers == workers]
        over_phased = [r.over_phased for r in group]
        over_bound = [r.over_bound for r in group]
        out.append(
            {
                "workers": workers,
                "seeds": [r.seed for r in group],
                "wavefront_over_phased": _spread(over_phased),
                "wavefront_over_lower_bound": _spread(over_bound),
                "faster_target_holds_for_every_seed": all(r.faster_target_holds for r in group),
                "bound_target_holds_for_every_seed": all(r.bound_target_holds for r in group),
            }
        )
    return out


def _spread(values: Sequence[float]) -> dict[str, float]:
    return {"min": min(values), "mean": statistics.fmean(values), "max": max(values)}


def render(rows: Sequence[Comparison]) -> str:
    """The results as plain-text tables (hours, ratios, wall seconds)."""
    head = (
        f"{'workers':>7} {'seed':>4} {'phased h':>9} {'wavefront h':>11} {'bound h':>8} "
        f"{'wf/ph':>6} {'wf/bound':>8} {'util ph':>7} {'util wf':>7} "
        f"{'wall ph s':>9} {'wall wf s':>9}  {'<=0.70':>6} {'<=1.10':>6} {'done':>4}"
    )
    lines = [
        "Makespan on the stigmergy tree (27 components, 81 work items), virtual hours.",
        "Targets: wavefront/phased <= 0.70; wavefront/lower bound <= 1.10.",
        "",
        head,
        "-" * len(head),
    ]
    for r in rows:
        lines.append(
            f"{r.workers:>7} {r.seed:>4} {r.phased_s / HOUR_S:>9.2f} "
            f"{r.wavefront_s / HOUR_S:>11.2f} {r.lower_bound_s / HOUR_S:>8.2f} "
            f"{r.over_phased:>6.3f} {r.over_bound:>8.3f} "
            f"{r.phased_utilisation:>7.1%} {r.wavefront_utilisation:>7.1%} "
            f"{r.phased_wall_s:>9.2f} {r.wavefront_wall_s:>9.2f}  "
            f"{_yes(r.faster_target_holds):>6} {_yes(r.bound_target_holds):>6} "
            f"{_yes(r.completed):>4}"
        )
    lines += ["", "Across seeds (min / mean / max):", ""]
    for s in summarise(rows):
        ph = s["wavefront_over_phased"]
        lb = s["wavefront_over_lower_bound"]
        assert isinstance(ph, dict) and isinstance(lb, dict)
        lines.append(
            f"  {s['workers']} workers: wavefront/phased {ph['min']:.3f} / {ph['mean']:.3f} / "
            f"{ph['max']:.3f} (target <= 0.70: "
            f"{_yes(bool(s['faster_target_holds_for_every_seed']))}); "
            f"wavefront/bound {lb['min']:.3f} / {lb['mean']:.3f} / {lb['max']:.3f} "
            f"(target <= 1.10: {_yes(bool(s['bound_target_holds_for_every_seed']))})"
        )
    return "\n".join(lines)


def _yes(flag: bool) -> str:
    return "yes" if flag else "NO"


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark and print it.

    Returns:
        0, or 1 when a run did not complete (a bug, not a slow schedule), or
        when ``--check`` is given and a target does not hold.
    """
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    parser.add_argument("--workers", type=int, nargs="+", default=list(WORKERS))
    parser.add_argument("--seeds", type=int, nargs="+", default=list(SEEDS))
    parser.add_argument("--check", action="store_true", help="exit 1 when a target does not hold")
    args = parser.parse_args(argv)
    rows = run_benchmark(workers=args.workers, seeds=args.seeds)
    if args.json:
        doc = {
            "tree": "stigmergy",
            "targets": {
                "max_wavefront_over_phased": MAX_WAVEFRONT_OVER_PHASED,
                "max_wavefront_over_lower_bound": MAX_WAVEFRONT_OVER_BOUND,
            },
            "runs": [r.as_json() for r in rows],
            "summary": summarise(rows),
        }
        print(json.dumps(doc, indent=2))
    else:
        print(render(rows))
    if not all(r.completed for r in rows):
        print("error: a run did not complete; see the `done` column", file=sys.stderr)
        return 1
    if args.check and not all(r.faster_target_holds and r.bound_target_holds for r in rows):
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
