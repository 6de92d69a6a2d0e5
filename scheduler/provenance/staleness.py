"""Staleness (6.3): is a component's verification still current?

A component is verified when its baseline is captured. Measured against
``staleness_window_days`` (pact.yaml, default 90):

- **fresh**: verified within the window, and no dependency was verified after it;
- **aging**: verified within the window, but dependencies were verified (changed)
  after it: it still passes against what it was built on, not what is there now;
- **stale**: verified longer ago than the window (whatever its dependencies did).

``now`` is passed in; nothing here reads a clock or a file.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict

from scheduler.provenance.baseline import ArtifactBaseline

StalenessStatus = Literal["fresh", "aging", "stale"]


class StalenessCheck(BaseModel):
    model_config = ConfigDict(frozen=True)

    component_id: str
    status: StalenessStatus
    reason: str
    days_since_verification: int
    dependency_updates_since: int = 0


def _parse(timestamp: str) -> datetime:
    moment = datetime.fromisoformat(timestamp)
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def check_staleness(
    component_id: str,
    baseline: ArtifactBaseline,
    dependency_baselines: dict[str, ArtifactBaseline],
    staleness_window_days: int = 90,
    *,
    now: datetime | None = None,
) -> StalenessCheck:
    """Determine if a component's contract is stale (see the module's rules).

    Raises:
        ValueError: ``staleness_window_days`` is below 1.
    """
    if staleness_window_days < 1:
        raise ValueError(f"staleness_window_days must be at least 1, not {staleness_window_days}")
    moment = now or datetime.now(UTC)
    verified = _parse(baseline.captured_at)
    days = max(0, (moment - verified).days)
    newer = sorted(
        cid
        for cid, dep in dependency_baselines.items()
        if cid != component_id and _parse(dep.captured_at) > verified
    )
    if days > staleness_window_days:
        status: StalenessStatus = "stale"
        reason = (
            f"verified {days} days ago, past the {staleness_window_days}-day window; re-verify it"
        )
    elif newer:
        status = "aging"
        reason = (
            f"{len(newer)} dependenc{'y' if len(newer) == 1 else 'ies'} re-verified since "
            f"({', '.join(newer)}); re-run its contract tests against them"
        )
    else:
        status = "fresh"
        reason = f"verified {days} days ago; no dependency changed since"
    return StalenessCheck(
        component_id=component_id,
        status=status,
        reason=reason,
        days_since_verification=days,
        dependency_updates_since=len(newer),
    )


def project_staleness(
    baselines: Mapping[str, ArtifactBaseline],
    dependencies: dict[str, list[str]],
    staleness_window_days: int,
    *,
    now: datetime | None = None,
) -> list[StalenessCheck]:
    """The staleness of every component with a baseline (``dependencies``: the run's
    internal dependencies per component)."""
    moment = now or datetime.now(UTC)
    return [
        check_staleness(
            cid,
            baseline,
            {d: baselines[d] for d in dependencies.get(cid, []) if d in baselines},
            staleness_window_days,
            now=moment,
        )
        for cid, baseline in sorted(baselines.items())
    ]
