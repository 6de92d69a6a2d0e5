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
import heapq
import json
import math
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from graphlib import TopologicalSorter
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

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
from scheduler.wavefront import Key, SchedulingMode, WorkGraph  # noqa: E402

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

#: Stigmergy target: wavefront within 5% of the floor, at every worker count.
MAX_WAVEFRONT_OVER_FLOOR = 1.05
#: Generated-trees target: wavefront within 10% of the lower bound, at every worker count.
MAX_WAVEFRONT_OVER_BOUND = 1.10
#: Seed 000's criterion, reported (not a target): wavefront at least 30% faster than phased.
MAX_WAVEFRONT_OVER_PHASED = 0.70

HOUR_S = 3600.0

#: The wavefront's tie-break between ready items of equal priority: earlier phases first.
PHASE_ORDER = {Phase.CONTRACT: 0, Phase.TEST: 1, Phase.IMPLEMENT: 2, Phase.INTEGRATE: 3}


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
    """Phased and wavefront on one tree at one worker count and seed, against bounds.

    Every bound is a makespan no schedule on ``workers`` slots can beat:
    ``lower_bound_s`` is max(critical path, W / w), ``floor_s`` is
    max(critical path, (W - r) / w + r) with r the root's integration, and
    ``tail_bound_s`` (see :func:`tail_bound_s`) is at least both. And
    ``clairvoyant_s`` (see :func:`clairvoyant_s`) is a makespan some schedule
    reaches, so the best possible one lies between the tail bound and it.
    """

    tree: str
    workers: int
    seed: int
    phased_s: float
    wavefront_s: float
    lower_bound_s: float
    floor_s: float
    tail_bound_s: float
    clairvoyant_s: float
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
    def over_floor(self) -> float:
        return self.wavefront_s / self.floor_s

    @property
    def over_tail(self) -> float:
        return self.wavefront_s / self.tail_bound_s

    @property
    def over_clairvoyant(self) -> float:
        return self.wavefront_s / self.clairvoyant_s

    @property
    def faster(self) -> bool:
        """Seed 000's criterion: wavefront at least 30% faster than phased."""
        return self.over_phased <= MAX_WAVEFRONT_OVER_PHASED

    def as_json(self) -> dict[str, object]:
        return {
            **asdict(self),
            "wavefront_over_phased": self.over_phased,
            "wavefront_over_lower_bound": self.over_bound,
            "wavefront_over_floor": self.over_floor,
            "wavefront_over_tail_bound": self.over_tail,
            "wavefront_over_clairvoyant": self.over_clairvoyant,
            "wavefront_30_percent_faster": self.faster,
        }


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


def floor_s(tree: DecompositionTree, graph: WorkGraph, latency: Latency, workers: int) -> float:
    """max(critical path, (W - r) / w + r), r being the root's integration (its last item).

    Nothing else can run while the root integrates (it waits for every other
    item), so the other W - r seconds of work are done on ``workers`` slots
    before it starts.
    """
    root_last = (
        tree.root_id,
        Phase.INTEGRATE if tree.nodes[tree.root_id].children else Phase.IMPLEMENT,
    )
    r = latency(*root_last)
    work = total_work_s(graph, latency)
    return max(critical_path_s(graph, latency), (work - r) / workers + r)


def tails_s(graph: WorkGraph, latency: Latency) -> dict[Key, float]:
    """q(j) per item: the longest chain of latencies that must follow j to the end."""
    order = list(TopologicalSorter({k: graph.prerequisites(*k) for k in graph.keys}).static_order())
    tail: dict[Key, float] = {}
    for key in reversed(order):
        tail[key] = max((tail[d] + latency(*d) for d in graph.dependents[key]), default=0.0)
    return tail


def tail_bound_s(graph: WorkGraph, latency: Latency, workers: int) -> float:
    """The floor's argument applied to every item, not only the root's integration.

    Let q(j) be the longest chain of work that must follow item j (its dependents,
    theirs, and so on, weighted by latency) and p(j) its own latency. In any
    schedule of makespan C, j ends by C - q(j); so for any T, at least
    max(0, min(p(j), p(j) + q(j) - T)) of j's work lies before C - T, and all of
    that forced work F(T) fits on ``workers`` slots in [0, C - T]:
    C >= T + F(T) / w. T = 0 gives W / w; T = r gives the floor. The bound is
    the largest over T at every q(j) and q(j) + p(j) (where F changes slope),
    and the critical path.
    """
    if workers < 1:
        raise ValueError("workers must be at least 1")
    own = {k: latency(*k) for k in graph.keys}
    tail = tails_s(graph, latency)
    best = critical_path_s(graph, latency)
    for t in {0.0, *tail.values(), *(tail[k] + own[k] for k in graph.keys)}:
        forced = sum(max(0.0, min(own[k], own[k] + tail[k] - t)) for k in graph.keys)
        if forced > 0:
            best = max(best, t + forced / workers)
    return best


def clairvoyant_s(graph: WorkGraph, latency: Latency, workers: int) -> float:
    """Makespan of the wavefront's rule given every item's latency in advance.

    List scheduling as the run loop does it (whenever a slot is free, start the
    ready item with the longest chain of work to the end; ties by phase, then
    id), except that the chains are weighted by each item's true latency rather
    than its phase's mean. Computed directly, not through the run loop. It is a
    schedule that exists, so no optimal makespan is above it: with the tail
    bound it brackets what any scheduler could reach, and the gap between the
    wavefront and it is what not knowing each item's duration costs.
    """
    own = {k: latency(*k) for k in graph.keys}
    tail = tails_s(graph, latency)
    unmet = {k: len(set(graph.prerequisites(*k))) for k in graph.keys}
    dependents = {k: set(graph.dependents[k]) for k in graph.keys}

    def entry(key: Key) -> tuple[float, int, str, Key]:
        return (-(tail[key] + own[key]), PHASE_ORDER[key[1]], key[0], key)

    ready = [entry(k) for k in graph.keys if unmet[k] == 0]
    heapq.heapify(ready)
    running: list[tuple[float, int, Key]] = []
    now_s, seq = 0.0, 0
    while ready or running:
        while ready and len(running) < workers:
            key = heapq.heappop(ready)[3]
            seq += 1
            heapq.heappush(running, (now_s + own[key], seq, key))
        now_s = running[0][0]
        while running and running[0][0] == now_s:
            finished = heapq.heappop(running)[2]
            for nxt in dependents[finished]:
                unmet[nxt] -= 1
                if unmet[nxt] == 0:
                    heapq.heappush(ready, entry(nxt))
    return now_s


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


def summarise_stigmergy(rows: Sequence[Comparison]) -> list[dict[str, object]]:
    """Per worker count: the ratios across seeds, and whether the floor target holds."""
    out: list[dict[str, object]] = []
    for workers in sorted({r.workers for r in rows}):
        group = [r for r in rows if r.workers == workers]
        out.append(
            {
                "workers": workers,
                "seeds": [r.seed for r in group],
                "wavefront_over_phased": _spread([r.over_phased for r in group]),
                "wavefront_over_lower_bound": _spread([r.over_bound for r in group]),
                "wavefront_over_floor": _spread([r.over_floor for r in group]),
                "wavefront_over_tail_bound": _spread([r.over_tail for r in group]),
                "wavefront_over_clairvoyant": _spread([r.over_clairvoyant for r in group]),
                "tail_bound_over_floor": _spread([r.tail_bound_s / r.floor_s for r in group]),
                "clairvoyant_over_floor": _spread([r.clairvoyant_s / r.floor_s for r in group]),
                "floor_target_holds_for_every_seed": all(
                    r.over_floor <= MAX_WAVEFRONT_OVER_FLOOR for r in group
                ),
                # Whether any schedule at all could meet the target: the tail bound is
                # a makespan no schedule beats, so above 1.05 x floor none can.
                "floor_target_attainable_for_every_seed": all(
                    r.tail_bound_s <= MAX_WAVEFRONT_OVER_FLOOR * r.floor_s for r in group
                ),
            }
        )
    return out


def summarise_generated(rows: Sequence[Comparison]) -> list[dict[str, object]]:
    """Per worker count: the ratios across trees, the 30%-faster share, the bound target."""
    out: list[dict[str, object]] = []
    for workers in sorted({r.workers for r in rows}):
        group = [r for r in rows if r.workers == workers]
        limit = MAX_WAVEFRONT_OVER_BOUND
        misses = [r for r in group if r.over_bound > limit]
        out.append(
            {
                "workers": workers,
                "trees": len(group),
                "wavefront_over_phased": _spread([r.over_phased for r in group]),
                "wavefront_over_lower_bound": _spread([r.over_bound for r in group]),
                "wavefront_over_tail_bound": _spread([r.over_tail for r in group]),
                "wavefront_over_clairvoyant": _spread([r.over_clairvoyant for r in group]),
                "tail_bound_over_lower_bound": _spread(
                    [r.tail_bound_s / r.lower_bound_s for r in group]
                ),
                "clairvoyant_over_lower_bound": _spread(
                    [r.clairvoyant_s / r.lower_bound_s for r in group]
                ),
                "share_wavefront_30_percent_faster": sum(r.faster for r in group) / len(group),
                "share_within_bound_target": sum(
                    r.over_bound <= MAX_WAVEFRONT_OVER_BOUND for r in group
                )
                / len(group),
                "bound_target_holds_for_every_tree": not misses,
                # Of the trees above the target: those where no schedule can meet it
                # (tail bound above it), and those where the clairvoyant schedule does.
                "misses": len(misses),
                "misses_no_schedule_can_meet": sum(
                    r.tail_bound_s > limit * r.lower_bound_s for r in misses
                ),
                "misses_clairvoyant_meets": sum(
                    r.clairvoyant_s <= limit * r.lower_bound_s for r in misses
                ),
                "tail_bound_within_target_for_every_tree": all(
                    r.tail_bound_s <= MAX_WAVEFRONT_OVER_BOUND * r.lower_bound_s for r in group
                ),
                "clairvoyant_within_target_for_every_tree": all(
                    r.clairvoyant_s <= MAX_WAVEFRONT_OVER_BOUND * r.lower_bound_s for r in group
                ),
            }
        )
    return out


def _spread(values: Sequence[float]) -> dict[str, float]:
    return {
        "min": min(values),
        "median": statistics.median(values),
        "mean": statistics.fmean(values),
        "max": max(values),
    }


def render_stigmergy(rows: Sequence[Comparison]) -> str:
    """The stigmergy part as plain-text tables (hours, ratios, wall seconds)."""
    head = (
        f"{'workers':>7} {'seed':>4} {'phased h':>8} {'wavefront h':>11} {'bound h':>7} "
        f"{'floor h':>7} {'tail h':>6} {'clairv h':>8} {'wf/ph':>6} {'wf/bound':>8} "
        f"{'wf/floor':>8} {'wf/tail':>7} {'wf/clairv':>9} {'util ph':>7} {'util wf':>7} "
        f"{'wall ph s':>9} {'wall wf s':>9}  {'<=1.05':>6} {'done':>4}"
    )
    lines = [
        "Makespan on the stigmergy tree (27 components, 81 work items), virtual hours.",
        "Target: wavefront/floor <= 1.05 at every worker count and seed.",
        "",
        head,
        "-" * len(head),
    ]
    for r in rows:
        lines.append(
            f"{r.workers:>7} {r.seed:>4} {r.phased_s / HOUR_S:>8.3f} "
            f"{r.wavefront_s / HOUR_S:>11.3f} {r.lower_bound_s / HOUR_S:>7.3f} "
            f"{r.floor_s / HOUR_S:>7.3f} {r.tail_bound_s / HOUR_S:>6.3f} "
            f"{r.clairvoyant_s / HOUR_S:>8.3f} {r.over_phased:>6.3f} {r.over_bound:>8.3f} "
            f"{r.over_floor:>8.3f} {r.over_tail:>7.3f} {r.over_clairvoyant:>9.3f} "
            f"{r.phased_utilisation:>7.1%} {r.wavefront_utilisation:>7.1%} "
            f"{r.phased_wall_s:>9.2f} {r.wavefront_wall_s:>9.2f}  "
            f"{_yes(r.over_floor <= MAX_WAVEFRONT_OVER_FLOOR):>6} {_yes(r.completed):>4}"
        )
    head = (
        f"{'workers':>7} {'wf/floor':>8} {'<=1.05':>6} {'tail/floor':>10} {'attainable':>10} "
        f"{'clairv/floor':>12} {'wf/tail':>7} {'wf/clairv':>9} {'wf/ph':>6}"
    )
    lines += ["", "Per worker count, worst seed (mean of wf/ph):", "", head, "-" * len(head)]
    for s in summarise_stigmergy(rows):
        lines.append(
            f"{s['workers']:>7} {_at(s, 'wavefront_over_floor', 'max'):>8.3f} "
            f"{_yes(bool(s['floor_target_holds_for_every_seed'])):>6} "
            f"{_at(s, 'tail_bound_over_floor', 'max'):>10.3f} "
            f"{_yes(bool(s['floor_target_attainable_for_every_seed'])):>10} "
            f"{_at(s, 'clairvoyant_over_floor', 'max'):>12.3f} "
            f"{_at(s, 'wavefront_over_tail_bound', 'max'):>7.3f} "
            f"{_at(s, 'wavefront_over_clairvoyant', 'max'):>9.3f} "
            f"{_at(s, 'wavefront_over_phased', 'mean'):>6.3f}"
        )
    return "\n".join(lines)


def render_generated(
    trees: Sequence[GeneratedTree], rows: Sequence[Comparison], *, sigma: float = LOGNORMAL_SIGMA
) -> str:
    """The generated-trees part: one row per tree, ratios side by side per worker count."""
    workers = sorted({r.workers for r in rows})
    by_key = {(r.tree, r.workers): r for r in rows}
    ph_cols = " ".join(f"{f'ph@{w}':>6}" for w in workers)
    lb_cols = " ".join(f"{f'lb@{w}':>6}" for w in workers)
    facts = f"{'tree':>7} {'comps':>5} {'items':>5} {'depth':>5} {'indep':>5}"
    head = f"{facts}  {ph_cols}  {lb_cols}  done"
    lines = [
        f"Generated deep trees ({len(trees)}; lognormal phase durations, sigma {sigma}).",
        "ph@w: wavefront/phased at w workers (<= 0.70: wavefront at least 30% faster);",
        "lb@w: wavefront/lower bound at w workers (target <= 1.10).",
        "",
        head,
        "-" * len(head),
    ]
    for t in trees:
        group = [by_key[(t.name, w)] for w in workers]
        items = len(WorkGraph(t.tree).keys)
        ph = " ".join(f"{r.over_phased:>6.3f}" for r in group)
        lb = " ".join(f"{r.over_bound:>6.3f}" for r in group)
        done = _yes(all(r.completed for r in group))
        lines.append(
            f"{t.name:>7} {t.components:>5} {items:>5} {t.depth:>5} {t.independent_leaves:>5}  "
            f"{ph}  {lb}  {done:>4}"
        )
    head = (
        f"{'workers':>7} {'wf/ph med':>9} {'wf/ph min':>9} {'>=30% faster':>12}  "
        f"{'wf/bound med':>12} {'wf/bound max':>12} {'<=1.10':>6} {'target':>6} "
        f"{'miss':>4} {'no sched':>8} {'clairv ok':>9}  "
        f"{'tail/bound max':>14} {'clairv/bound med':>16} {'clairv/bound max':>16} "
        f"{'wf/clairv med':>13} {'wf/clairv max':>13}"
    )
    lines += ["", "Per worker count, across trees:", "", head, "-" * len(head)]
    for s in summarise_generated(rows):
        lines.append(
            f"{s['workers']:>7} {_at(s, 'wavefront_over_phased', 'median'):>9.3f} "
            f"{_at(s, 'wavefront_over_phased', 'min'):>9.3f} "
            f"{_share(s['share_wavefront_30_percent_faster']):>12}  "
            f"{_at(s, 'wavefront_over_lower_bound', 'median'):>12.3f} "
            f"{_at(s, 'wavefront_over_lower_bound', 'max'):>12.3f} "
            f"{_share(s['share_within_bound_target']):>6} "
            f"{_yes(bool(s['bound_target_holds_for_every_tree'])):>6} "
            f"{s['misses']:>4} {s['misses_no_schedule_can_meet']:>8} "
            f"{s['misses_clairvoyant_meets']:>9}  "
            f"{_at(s, 'tail_bound_over_lower_bound', 'max'):>14.3f} "
            f"{_at(s, 'clairvoyant_over_lower_bound', 'median'):>16.3f} "
            f"{_at(s, 'clairvoyant_over_lower_bound', 'max'):>16.3f} "
            f"{_at(s, 'wavefront_over_clairvoyant', 'median'):>13.3f} "
            f"{_at(s, 'wavefront_over_clairvoyant', 'max'):>13.3f}"
        )
    faster = [r for r in rows if r.faster]
    lines.append(
        f"\nWavefront >= 30% faster than phased: {len(faster)} of {len(rows)} "
        f"(tree, workers) pairs ({_share(len(faster) / len(rows))}); "
        f"{len({r.tree for r in faster})} of {len(trees)} trees at one worker count or more."
    )
    return "\n".join(lines)


def _at(summary: Mapping[str, object], name: str, statistic: str) -> float:
    spread = summary[name]
    assert isinstance(spread, dict)
    return float(spread[statistic])


def _share(value: object) -> str:
    assert isinstance(value, float)
    return f"{value:.0%}"


def _yes(flag: bool) -> str:
    return "yes" if flag else "NO"


def targets_hold(stigmergy: Sequence[Comparison], generated: Sequence[Comparison]) -> bool:
    """Both targets: stigmergy within 1.05x the floor, generated within 1.10x the bound."""
    return all(r.over_floor <= MAX_WAVEFRONT_OVER_FLOOR for r in stigmergy) and all(
        r.over_bound <= MAX_WAVEFRONT_OVER_BOUND for r in generated
    )


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
