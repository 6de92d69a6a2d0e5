"""Inspecting a run without driving it: ``pact status`` and ``pact rebuild``.

Nothing here writes, except ``rebuild_run`` (state.json, and only when it would not
throw away anything the log lost).
"""

from __future__ import annotations

import logging
from collections.abc import Collection
from pathlib import Path

from pact_workers.errors import RunDirError
from scheduler.commands.rundir import check_run_dir
from scheduler.interview.answers import low_confidence_warnings
from scheduler.launch import load_run, load_state
from scheduler.project import ProjectDir
from scheduler.provenance.promotion import missing_provenance, restore_provenance
from scheduler.rebuild import (
    disk_inconsistencies,
    read_state_json,
    rebuild_state,
    validate_state_consistency,
)
from scheduler.state import RunState

log = logging.getLogger(__name__)


def read_status(*, project_dir: Path) -> tuple[RunState, list[str]]:
    """The run's state, folded from its audit log, and any warnings about the log."""
    project = ProjectDir(project_dir)
    check_run_dir(project)
    return load_state(project)


def status_report(
    *, project_dir: Path, untouched: Collection[str] = ()
) -> tuple[RunState, list[str], list[str]]:
    """What ``pact status`` shows: the state, warnings about the log, inconsistencies.

    When an intact snapshot marking a prefix of the log was the starting point, the
    state is consistent with the log by construction, so only the disk is checked
    (that every verified file is there); any other state.json is compared with the
    whole log, contents included, as ``pact rebuild --dry-run`` does. ``untouched``:
    components whose verified files the drift check found as captured (not looked at
    again).
    """
    project = ProjectDir(project_dir)
    check_run_dir(project)
    state, warnings, covered = load_run(project)
    if covered is not None:
        problems = disk_inconsistencies(state, project, contents=False, untouched=untouched)
    else:  # the state is the fold of the whole log: compare state.json with it
        problems = state_json_problems(project_dir=project_dir, truth=state)
    # Interview answers less sure than 0.5 (seed 000, 3.2) are worth a second look.
    warnings = [*warnings, *low_confidence_warnings(state.interview_answers)]
    return state, warnings, problems


def state_json_problems(*, project_dir: Path, truth: RunState | None = None) -> list[str]:
    """How state.json and the disk disagree with the audit log (empty: consistent).

    ``truth``: the fold of the whole log, when the caller has it (see
    :func:`~scheduler.rebuild.validate_state_consistency`).
    """
    return _check_state_json(project_dir, truth)[1]


def _check_state_json(
    project_dir: Path, truth: RunState | None
) -> tuple[RunState | None, list[str]]:
    """state.json as read (None: unreadable) and its :func:`state_json_problems`."""
    on_disk, error = read_state_json(project_dir)
    if on_disk is None:
        return None, [error or "state.json cannot be read"]
    return on_disk, validate_state_consistency(on_disk, project_dir, truth=truth)


def rebuild_run(
    *, project_dir: Path, dry_run: bool, force: bool = False
) -> tuple[RunState, list[str]]:
    """Rebuild state.json from the audit log; returns the state and the inconsistencies
    found in the old state.json (written over unless ``dry_run``).

    Raises:
        RunDirError: the log holds no run, or the snapshot records more progress than
            the log replays to (a log that lost events) and ``force`` is not set.
    """
    project = ProjectDir(project_dir)
    check_run_dir(project, writes=not dry_run)
    rebuilt = rebuild_state(project.root)
    on_disk, problems = _check_state_json(project_dir, rebuilt)
    problems += missing_provenance(project, rebuilt)  # re-created below unless dry_run
    loss = _progress_lost(on_disk, rebuilt) if on_disk is not None else None
    if loss and not force and not dry_run:
        raise RunDirError(
            f"{project.state_path}: records more than {project.audit_path} replays to "
            f"({loss}); rebuilding would throw that away. Nothing was written; check the "
            "log (a restored backup?) or pass --force to rebuild from the log anyway"
        )
    if not dry_run:
        project.write_state(rebuilt)
        # The sidecars and baselines of verified work, where they went missing.
        restore_provenance(project, rebuilt, project.store())
    return rebuilt, problems


def _progress_lost(snapshot: RunState, rebuilt: RunState) -> str | None:
    """What the snapshot knows that the rebuilt state does not, or None."""
    if snapshot.run_id and snapshot.run_id != rebuilt.run_id:
        return f"run {snapshot.run_id} against run {rebuilt.run_id}"
    done_before = sum(1 for i in snapshot.items.values() if i.status.value == "done")
    done_after = sum(1 for i in rebuilt.items.values() if i.status.value == "done")
    if done_before > done_after:
        return f"{done_before} items done against {done_after}"
    if snapshot.last_seq > rebuilt.last_seq:
        return f"events up to {snapshot.last_seq} against {rebuilt.last_seq}"
    return None
