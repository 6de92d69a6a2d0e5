"""Scheduling benchmark: wavefront against phased, and both against lower bounds.

Runs the real :class:`~scheduler.run.RunController` (audit log, state fold,
inputs, promotion) over a :class:`~scheduler.executors.simulated.SimulatedExecutor`
on a virtual clock, in both scheduling modes, and compares each makespan with
bounds no schedule can beat. Two parts:

- the real stigmergy tree, at 2, 4, 8 and 16 workers for three latency seeds,
  against the floor max(critical path, (W - r)/w + r) (target: <= 1.05x);
- a family of generated deep trees (``bench.trees.deep_tree``, lognormal phase
  durations), wavefront/phased and wavefront/lower bound at every worker count
  (target: <= 1.10x the lower bound), and the share of trees where wavefront is
  at least 30% faster than phased.

The makespans are virtual seconds, so they are exact and reproducible; only the
wall time columns are measurements.

Usage::

    python bench/scheduling.py [--quick] [--json] [--check] [--workers 2 4 8 16]
        [--seeds 1 2 3] [--trees 50] [--sigma 0.5]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench.bounds import clairvoyant_s, floor_s, tail_bound_s  # noqa: E402
from bench.comparisons import (  # noqa: E402
    MAX_WAVEFRONT_OVER_BOUND,
    MAX_WAVEFRONT_OVER_FLOOR,
    MAX_WAVEFRONT_OVER_PHASED,
    Comparison,
    render_generated,
    render_stigmergy,
    summarise_generated,
    summarise_stigmergy,
    targets_hold,
)
from bench.trees import deep_tree, independent_leaves  # noqa: E402
from pact_workers.models.tree import DecompositionTree, load_tree, tree_from_data  # noqa: E402
from pact_workers.models.work import ItemStatus, Phase  # noqa: E402
from scheduler.executors.simulated import (  # noqa: E402
    MEAN_LATENCY_S,
    Latency,
    SimulatedExecutor,
    TaskSpan,
    VirtualClock,
    critical_path_s,
    lower_bound_s,
    stigmergy_like_latency,
    total_work_s,
)
from scheduler.launch import start_run  # noqa: E402
from scheduler.project import ProjectDir  # noqa: E402
from scheduler.run import RunController  # noqa: E402
from scheduler.settings import Settings  # noqa: E402
from scheduler.state import RunStatus  # noqa: E402
from scheduler.wavefront import SchedulingMode, WorkGraph  # noqa: E402

STIGMERGY = REPO / "tests" / "data" / "real" / "stigmergy"

WORKERS = (2, 4, 8, 16)
SEEDS = (1, 2, 3)
#: Generated trees: ``deep_tree(0)`` .. ``deep_tree(TREES - 1)``.
TREES = 50
#: ``--quick``: one stigmergy seed and the first QUICK_TREES generated trees.
QUICK_SEEDS = (1,)
QUICK_TREES = 10
#: Spread of the generated trees' phase durations: ln(duration) has this
#: standard deviation, and each phase keeps its mean (MEAN_LATENCY_S).
LOGNORMAL_SIGMA = 0.5


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
class GeneratedTree:
    """One tree of the generated family, with the facts the tables show."""

    name: str
    seed: int
    tree: DecompositionTree
    dependencies: dict[str, list[str]]
    depth: int
    independent_leaves: int

    @property
    def components(self) -> int:
        return len(self.tree.nodes)


def load_stigmergy(data_dir: Path = STIGMERGY) -> tuple[DecompositionTree, dict[str, list[str]]]:
    """The stigmergy tree with the internal dependencies its published contracts declare."""
    deps = json.loads((data_dir / "dependencies.json").read_text(encoding="utf-8"))
    internal: dict[str, list[str]] = deps["internal"]
    tree = load_tree(data_dir / "decomposition" / "tree.json").with_dependencies(internal)
    return tree, internal


def generated_tree(seed: int) -> GeneratedTree:
    """``deep_tree(seed)`` as a validated tree; its contracts declare its dependencies."""
    data = deep_tree(seed)
    name = f"deep-{seed:02d}"
    tree = tree_from_data(data, name)
    return GeneratedTree(
        name=name,
        seed=seed,
        tree=tree,
        dependencies={cid: list(node.dependencies) for cid, node in tree.nodes.items()},
        depth=max(node["depth"] for node in data["nodes"].values()),
        independent_leaves=len(independent_leaves(data["nodes"])),
    )


def lognormal_latency(seed: int, sigma: float = LOGNORMAL_SIGMA) -> Latency:
    """Lognormal latencies: each phase's mean times exp(sigma * z - sigma^2 / 2), z ~ N(0, 1).

    The mean of each phase stays MEAN_LATENCY_S (the median is lower, the tail
    longer: at sigma 0.5 about one item in twelve takes over twice its phase's median).
    As in ``stigmergy_like_latency``, z comes from a hash of (seed, component,
    phase), so a latency does not depend on the order a scheduler asks for it.
    """
    normal = statistics.NormalDist()

    def latency(component_id: str, phase: Phase) -> float:
        key = f"lognormal\0{seed}\0{component_id}\0{phase.value}".encode()
        digest = hashlib.sha256(key).digest()
        unit = (int.from_bytes(digest[:8], "big") + 0.5) / 2**64
        z = normal.inv_cdf(unit)
        return MEAN_LATENCY_S[phase] * math.exp(sigma * z - sigma * sigma / 2)

    return latency


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
    tree: DecompositionTree,
    dependencies: dict[str, list[str]],
    *,
    workers: int,
    seed: int,
    latency: Latency | None = None,
    name: str = "stigmergy",
) -> Comparison:
    """Phased and wavefront runs with the same latencies, and the bounds they share.

    ``latency`` defaults to ``stigmergy_like_latency(seed)``.
    """
    latency = latency or stigmergy_like_latency(seed)
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
        tree=name,
        workers=workers,
        seed=seed,
        phased_s=phased.makespan_s,
        wavefront_s=wavefront.makespan_s,
        lower_bound_s=lower_bound_s(graph, latency, workers),
        floor_s=floor_s(tree, graph, latency, workers),
        tail_bound_s=tail_bound_s(graph, latency, workers),
        clairvoyant_s=clairvoyant_s(graph, latency, workers),
        critical_path_s=critical_path_s(graph, latency),
        total_work_s=total_work_s(graph, latency),
        phased_wall_s=phased.wall_s,
        wavefront_wall_s=wavefront.wall_s,
        phased_utilisation=phased.utilisation,
        wavefront_utilisation=wavefront.utilisation,
        completed=phased.completed and wavefront.completed,
    )


def run_stigmergy(
    *, workers: Sequence[int] = WORKERS, seeds: Sequence[int] = SEEDS, data_dir: Path = STIGMERGY
) -> list[Comparison]:
    """Every (workers, seed) comparison on the stigmergy tree."""
    tree, dependencies = load_stigmergy(data_dir)
    return [compare(tree, dependencies, workers=w, seed=s) for w in workers for s in seeds]


def run_generated(
    trees: Sequence[GeneratedTree],
    *,
    workers: Sequence[int] = WORKERS,
    sigma: float = LOGNORMAL_SIGMA,
    progress: Callable[[str], None] | None = None,
) -> list[Comparison]:
    """Every (tree, workers) comparison; tree i's latencies are ``lognormal_latency(i)``."""
    rows = []
    for t in trees:
        latency = lognormal_latency(t.seed, sigma)
        for w in workers:
            rows.append(
                compare(
                    t.tree, t.dependencies, workers=w, seed=t.seed, latency=latency, name=t.name
                )
            )
        if progress is not None:
            progress(t.name)
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark and print it.

    Returns:
        0, or 1 when a run did not complete (a bug, not a slow schedule), or
        when ``--check`` is given and a target does not hold.
    """
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    parser.add_argument("--workers", type=int, nargs="+", default=list(WORKERS))
    parser.add_argument("--seeds", type=int, nargs="+", help="stigmergy latency seeds (1 2 3)")
    parser.add_argument("--trees", type=int, help=f"generated trees ({TREES}; 0: none)")
    parser.add_argument("--sigma", type=float, default=LOGNORMAL_SIGMA)
    parser.add_argument(
        "--quick",
        action="store_true",
        help=f"stigmergy seed {QUICK_SEEDS[0]} and {QUICK_TREES} generated trees",
    )
    parser.add_argument("--check", action="store_true", help="exit 1 when a target does not hold")
    args = parser.parse_args(argv)
    seeds = args.seeds or list(QUICK_SEEDS if args.quick else SEEDS)
    count = args.trees if args.trees is not None else (QUICK_TREES if args.quick else TREES)

    stigmergy = run_stigmergy(workers=args.workers, seeds=seeds) if seeds else []
    trees = [generated_tree(i) for i in range(count)]
    generated = run_generated(
        trees,
        workers=args.workers,
        sigma=args.sigma,
        progress=(lambda name: print(f"{name} done", file=sys.stderr))
        if sys.stderr.isatty()
        else None,
    )
    if args.json:
        doc = {
            "targets": {
                "stigmergy_max_wavefront_over_floor": MAX_WAVEFRONT_OVER_FLOOR,
                "generated_max_wavefront_over_lower_bound": MAX_WAVEFRONT_OVER_BOUND,
                "reported_max_wavefront_over_phased": MAX_WAVEFRONT_OVER_PHASED,
            },
            "stigmergy": {
                "runs": [r.as_json() for r in stigmergy],
                "summary": summarise_stigmergy(stigmergy) if stigmergy else [],
            },
            "generated": {
                "sigma": args.sigma,
                "trees": [
                    {
                        "name": t.name,
                        "seed": t.seed,
                        "components": t.components,
                        "items": len(WorkGraph(t.tree).keys),
                        "depth": t.depth,
                        "independent_leaves": t.independent_leaves,
                    }
                    for t in trees
                ],
                "runs": [r.as_json() for r in generated],
                "summary": summarise_generated(generated) if generated else [],
            },
            "targets_hold": targets_hold(stigmergy, generated),
        }
        print(json.dumps(doc, indent=2))
    else:
        parts = []
        if stigmergy:
            parts.append(render_stigmergy(stigmergy))
        if generated:
            parts.append(render_generated(trees, generated, sigma=args.sigma))
        print("\n\n".join(parts))
    if not all(r.completed for r in [*stigmergy, *generated]):
        print("error: a run did not complete; see the `done` column", file=sys.stderr)
        return 1
    if args.check and not targets_hold(stigmergy, generated):
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
