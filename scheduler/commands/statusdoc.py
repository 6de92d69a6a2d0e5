"""The document ``pact status --json`` prints and ``pact mcp`` serves as
``pact://status``: built here once, from what :func:`status_report` and
:func:`provenance_report` found, so the two never drift apart."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from scheduler.audit import is_driven
from scheduler.cache import cache_report
from scheduler.commands.agents import NOOP_NOTE
from scheduler.commands.inspection import status_report
from scheduler.commands.provenance import ProvenanceReport, provenance_report
from scheduler.commands.rundir import check_run_dir
from scheduler.gates.report import gates_report
from scheduler.pactimport.report import import_json
from scheduler.project import ProjectDir
from scheduler.provenance.baseline import read_baselines
from scheduler.provenance.drift import check_project_drift
from scheduler.regression.report import regressions_report
from scheduler.report import poisoned_items, summary_rows
from scheduler.state import RunState


def status_document(
    project_dir: Path,
    state: RunState,
    *,
    warnings: list[str],
    problems: list[str],
    provenance: ProvenanceReport,
) -> dict[str, Any]:
    """The run's state as JSON: status, spend, items, components and each report."""
    return {
        "run_id": state.run_id,
        "status": state.status.value,
        "phase": state.phase,
        "driven": is_driven(ProjectDir(project_dir).audit_path),
        "agent": state.agent,
        "pause_reason": state.pause_reason,
        "recommendation": state.recommendation,
        "fail_reason": state.fail_reason,
        "usage": state.usage.model_dump(),
        "spend_by_phase": state.spend_by_phase,
        "items": state.counts(),
        "components": summary_rows(state),
        "poisoned": dict(poisoned_items(state)),
        "pattern_type": state.pattern_type,
        "affected_components": state.affected_components,
        "inconsistencies": problems,
        "validation": {
            cid: check.model_dump(mode="json") for cid, check in state.validation.items()
        },
        "cache": cache_report(state).to_json(),
        "imported": import_json(state, project_dir),
        "gates": gates_report(state),
        "regressions": regressions_report(state),
        "provenance": provenance.to_json(),
        "warnings": [*warnings, *([NOOP_NOTE] if state.agent == "noop" else [])],
    }


def gather_status(
    project_dir: Path,
) -> tuple[RunState, list[str], list[str], ProvenanceReport]:
    """What ``pact status`` shows: the state, warnings, inconsistencies and provenance.

    The verified files are looked at once: the drift check's stat of each component's
    files against its baseline comes first, and a component found exactly as captured
    is not checked again for missing files.

    Raises:
        InputError: no run there, or one that cannot be read.
    """
    check_run_dir(ProjectDir(project_dir))
    baselines = read_baselines(project_dir)
    drift = check_project_drift(project_dir, baselines)
    state, warnings, problems = status_report(project_dir=project_dir, untouched=drift.untouched)
    provenance = provenance_report(project_dir=project_dir, state=state, drift=(baselines, drift))
    return state, warnings, problems, provenance


def status_json(project_dir: Path) -> dict[str, Any]:
    """Read the run in ``project_dir`` and build its :func:`status_document`.

    Raises:
        InputError: no run there, or one that cannot be read.
    """
    state, warnings, problems, provenance = gather_status(project_dir)
    return status_document(
        project_dir, state, warnings=warnings, problems=problems, provenance=provenance
    )
