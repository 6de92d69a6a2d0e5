"""The scheduling benchmark's results (``bench/scheduling.py``): one comparison per
(tree, workers, seed), the summaries over seeds and trees, the tables, the targets."""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

from scheduler.wavefront import WorkGraph

if TYPE_CHECKING:
    from bench.scheduling import GeneratedTree

#: Stigmergy target: wavefront within 5% of the floor, at every worker count.
MAX_WAVEFRONT_OVER_FLOOR = 1.05
#: Generated-trees target: wavefront within 10% of the lower bound, at every worker count.
MAX_WAVEFRONT_OVER_BOUND = 1.10
#: Seed 000's criterion, reported (not a target): wavefront at least 30% faster than phased.
MAX_WAVEFRONT_OVER_PHASED = 0.70

HOUR_S = 3600.0


@dataclass(frozen=True)
class Comparison:
    """Phased and wavefront on one tree at one worker count and seed, against bounds.

    Every bound is a makespan no schedule on ``workers`` slots can beat:
    ``lower_bound_s`` is max(critical path, W / w), ``floor_s`` is
    max(critical path, (W - r) / w + r) with r the root's integration, and
    ``tail_bound_s`` (see :func:`bench.bounds.tail_bound_s`) is at least both. And
    ``clairvoyant_s`` (see :func:`bench.bounds.clairvoyant_s`) is a makespan some schedule
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
    trees: Sequence[GeneratedTree], rows: Sequence[Comparison], *, sigma: float
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
