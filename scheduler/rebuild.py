"""Event sourcing checks: rebuild the state from the log, compare it with disk (seed 000, 1.5)."""

from __future__ import annotations

import logging
import os
from collections.abc import Collection
from pathlib import Path

from pydantic import ValidationError

from pact_workers.artifacts import digest_bytes
from pact_workers.errors import ArtifactError
from pact_workers.gcpause import collector_paused
from pact_workers.models.work import ItemStatus, Phase
from scheduler.audit import scan_events
from scheduler.launch import require_a_run
from scheduler.lifecycle.damaged import fold_as_read
from scheduler.project import ProjectDir
from scheduler.snapshot import parse_state_json
from scheduler.state import RunState

log = logging.getLogger(__name__)

#: Cost sums may differ in the last bits after a JSON round trip.
COST_TOLERANCE_USD = 1e-6


def rebuild_state(project_dir: Path) -> RunState:
    """Reconstruct the run state by replaying ``.pact/audit.jsonl``; read-only.

    Unreadable lines are skipped (a partial reconstruction); they are listed in
    ``state.warnings``.

    Raises:
        RunDirError: the project has no audit log, or the log holds no run (RunDirError
            is a ValueError).
    """
    project = ProjectDir(project_dir)
    project.require_run()
    # A damaged log is folded as far as it goes (illegal events after a lost line
    # are skipped with a warning); an intact one strictly. One line at a time: the
    # parsed events of a large log would take more memory than its state.
    warnings: list[str] = []
    with collector_paused():
        state = fold_as_read(scan_events(project.audit_path, warnings), warnings)
    for warning in warnings:
        log.warning(warning)
    require_a_run(state, project, warnings)
    state.project_dir = str(project.root)
    state.warnings = warnings
    return state


def read_state_json(project_dir: Path) -> tuple[RunState | None, str | None]:
    """``state.json`` as it is on disk, or the reason it cannot be read."""
    path = ProjectDir(project_dir).state_path
    try:
        return parse_state_json(path.read_bytes()).state, None
    except FileNotFoundError:
        return None, f"{path}: missing"
    except (ValidationError, ValueError) as exc:
        return None, f"{path}: unreadable ({str(exc).splitlines()[0]})"
    except OSError as exc:  # a directory in its place, no permission, an I/O error
        return None, f"{path}: unreadable ({exc.strerror or exc})"


def validate_state_consistency(
    state: RunState, project_dir: Path, *, truth: RunState | None = None
) -> list[str]:
    """Compare ``state`` (typically state.json) with the audit log and the disk.

    ``truth``: the fold of the whole log (:func:`rebuild_state`), when the caller has
    just made it (a fold of a large log takes seconds); else it is made here.

    Returns one sentence per inconsistency; an empty list means consistent.
    """
    project = ProjectDir(project_dir)
    problems: list[str] = []
    if truth is None:
        truth = rebuild_state(project.root)
    problems += [f"audit log: {w}" for w in truth.warnings]
    if state.run_id != truth.run_id:
        problems.append(f"run id is {state.run_id!r}, the audit log says {truth.run_id!r}")
    if state.status != truth.status:
        problems.append(
            f"status is {state.status.value!r}, the audit log says {truth.status.value!r}"
        )
    for key, real in truth.items.items():
        mine = state.items.get(key)
        if mine is None:
            problems.append(f"{key}: missing from the state")
            continue
        if (mine.status, mine.attempt, mine.output) != (real.status, real.attempt, real.output):
            problems.append(
                f"{key}: state says {mine.status.value} (attempt {mine.attempt}), the audit log "
                f"says {real.status.value} (attempt {real.attempt})"
            )
    for key in sorted(set(state.items) - set(truth.items)):
        problems.append(f"{key}: in the state but not in the audit log")
    for field in ("input_tokens", "output_tokens"):
        if getattr(state.usage, field) != getattr(truth.usage, field):
            problems.append(
                f"{field}: state says {getattr(state.usage, field)}, the audit log sums to "
                f"{getattr(truth.usage, field)}"
            )
    if abs(state.usage.cost_usd - truth.usage.cost_usd) > COST_TOLERANCE_USD:
        problems.append(
            f"cost: state says ${state.usage.cost_usd:.6f}, the audit log sums to "
            f"${truth.usage.cost_usd:.6f}"
        )
    if state.phase != truth.phase:
        problems.append(
            f"phase is {state.phase!r} but the component statuses in the audit log say "
            f"{truth.phase!r}"
        )
    problems += disk_inconsistencies(state, project)
    return problems


def disk_inconsistencies(
    state: RunState,
    project: ProjectDir,
    *,
    contents: bool = True,
    untouched: Collection[str] = (),
) -> list[str]:
    """Done items whose verified files are missing from, or differ on, disk.

    ``contents=False`` only checks that every verified file is there (one ``stat``
    each, from the file list the log recorded): what ``pact status`` does on every
    call. Comparing contents reads and hashes every file (``pact rebuild``), except
    for a component with a provenance baseline: an edit of its verified files is drift,
    which ``pact status`` and ``pact validate`` report with its severity
    (:mod:`scheduler.provenance.baseline`), not an inconsistency of the run.
    ``untouched``: components whose verified files were just found exactly as their
    baseline captured them (``check_project_drift``); with ``contents=False`` they are
    not looked at again.
    """
    problems: list[str] = []
    store = project.store()
    root = str(project.root)
    baselines = str(project.pact / "baselines")
    for key, item in state.items.items():
        if item.status is not ItemStatus.DONE or item.output is None:
            continue
        if not contents and item.component_id in untouched:
            continue
        compare = contents and not os.path.isfile(
            os.path.join(baselines, f"{item.component_id}.json")
        )
        if contents or not item.files:
            try:
                manifest = store.get_manifest(item.output)
            except ArtifactError:
                problems.append(
                    f"{key}: verified output {item.output} is not in the artifact store"
                )
                continue
        else:
            manifest = dict.fromkeys(item.files, "")
        for rel, digest in manifest.items():
            path = project.promoted_path(item.component_id, item.phase, rel)
            if not os.path.isfile(path):
                problems.append(
                    f"{key}: marked done but its {_WHAT[item.phase]} "
                    f"{os.path.relpath(path, root)} is missing on disk"
                )
            elif compare and digest_bytes(Path(path).read_bytes()) != digest:
                problems.append(
                    f"{key}: {os.path.relpath(path, root)} differs from the verified "
                    f"{_WHAT[item.phase]}"
                )
    return problems


_WHAT = {
    Phase.CONTRACT: "contract",
    Phase.TEST: "tests",
    Phase.IMPLEMENT: "implementation",
    Phase.INTEGRATE: "integration",
}
