"""What ``pact status``, ``pact validate`` and the MCP server say about provenance:
drift against the verified baselines, staleness, the latest retrospective and the latest
run picture. Reads only."""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from pact_workers.errors import InputError, RunDirError
from scheduler.commands.rundir import check_run_dir
from scheduler.launch import load_state
from scheduler.project import ProjectDir
from scheduler.provenance.baseline import ArtifactBaseline, read_baselines
from scheduler.provenance.drift import DriftFinding, ProjectDrift, check_project_drift
from scheduler.provenance.retrospective import (
    RunRetrospective,
    generate_retrospective,
    latest_retrospective,
)
from scheduler.provenance.staleness import StalenessCheck, project_staleness
from scheduler.settings import load_settings
from scheduler.state import RunState


class ProvenanceReport(BaseModel):
    model_config = ConfigDict(frozen=True)

    drift: list[DriftFinding] = Field(default_factory=list)
    staleness: list[StalenessCheck] = Field(default_factory=list)
    staleness_window_days: int = 90
    retrospective: str | None = None
    timeline: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "drift": [f.model_dump() for f in self.drift],
            "staleness": [c.model_dump() for c in self.staleness if c.status != "fresh"],
            "fresh": sum(1 for c in self.staleness if c.status == "fresh"),
            "staleness_window_days": self.staleness_window_days,
            "retrospective": self.retrospective,
            "timeline": self.timeline,
        }


def latest_file(directory: Path, pattern: str) -> Path | None:
    """The newest file matching ``pattern`` in ``directory`` (None: none)."""
    if not directory.is_dir():
        return None
    found = [p for p in directory.glob(pattern) if p.is_file()]
    return max(found, key=lambda p: p.stat().st_mtime_ns) if found else None


#: Where ``pact timeline`` records the path of the last picture it drew.
TIMELINE_RECORD = Path(".pact") / "timeline.json"


def latest_timeline(project_dir: Path) -> str | None:
    """The path of the last run picture ``pact timeline`` drew (None: none, or gone)."""
    try:
        path = str(json.loads((project_dir / TIMELINE_RECORD).read_bytes())["path"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return path if Path(path).is_file() else None


def provenance_report(
    *,
    project_dir: Path,
    state: RunState,
    now: datetime | None = None,
    drift: tuple[Mapping[str, ArtifactBaseline], ProjectDrift] | None = None,
) -> ProvenanceReport:
    """Drift and staleness of every verified component, and where the latest
    retrospective and run picture are. An unreadable pact.yaml means the default window
    (``pact status`` reports the file's problem separately). ``drift``: the baselines
    and their drift, when the caller has read and checked them already."""
    try:
        window = load_settings(project_dir / "pact.yaml").staleness_window_days
    except InputError:
        window = 90
    if drift is None:
        found = read_baselines(project_dir)
        drift = found, check_project_drift(project_dir, found)
    baselines, checked = drift
    retro = latest_file(project_dir / ".pact" / "retrospectives", "*.json")
    picture = latest_timeline(project_dir)
    return ProvenanceReport(
        drift=checked.findings,
        staleness=project_staleness(baselines, state.dependencies, window, now=now),
        staleness_window_days=window,
        retrospective=str(retro) if retro else None,
        timeline=picture,
    )


def show_retrospective(*, project_dir: Path) -> tuple[RunRetrospective, bool]:
    """The run's latest retrospective, and whether it was saved: one is written when a
    run ends; for a run that has not ended (active, paused, interrupted) it is generated
    now from the log, and not saved.

    Raises:
        RunDirError: ``project_dir`` holds no run (its log is read first, as for
            ``pact status``: a saved retrospective does not outlive its run's log).
    """
    project = ProjectDir(project_dir)
    check_run_dir(project)
    load_state(project)
    saved = latest_retrospective(project_dir)
    if saved is not None:
        return saved, True
    try:
        return generate_retrospective(project_dir), False
    except ValueError as exc:
        raise RunDirError(str(exc)) from None
