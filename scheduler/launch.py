"""Opening a run: create its directory and first event, or fold an existing one.

``start_run`` is the only place a run directory comes into being; ``load_state``
is how every reader sees a run (from the audit log, never from state.json).
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Sequence
from pathlib import Path

from pact_workers.errors import RunDirError
from pact_workers.models.tree import DecompositionTree
from scheduler.audit import create_log
from scheduler.events import RunStarted
from scheduler.fold import fold
from scheduler.project import ProjectDir
from scheduler.settings import Settings
from scheduler.snapshot import load_folded
from scheduler.state import RunState


def new_run_id() -> str:
    return secrets.token_hex(6)


def start_run(
    project: ProjectDir,
    tree: DecompositionTree,
    *,
    tree_bytes: bytes,
    settings: Settings,
    agent: str = "",
    agent_options: dict[str, str] | None = None,
    sandbox: str = "",
    run_id: str | None = None,
    fence: Callable[[], None] | None = None,
) -> str:
    """Create the run directory and log ``run_started``; the tree is already validated.

    ``fence`` (a scheduler service's lease on the run) is checked before the log is
    written and when the first snapshot cannot be: a service frozen while it created
    the run may find that another took the run over meanwhile (and swept the
    snapshot's temporary file), and then raises the fence's error instead.
    """
    if project.has_run():
        raise _holds_a_run(project)
    run_id = run_id or new_run_id()
    project.tree_path.parent.mkdir(parents=True, exist_ok=True)
    project.tree_path.write_bytes(tree_bytes)
    try:
        event = create_log(
            project.audit_path,
            RunStarted(
                run_id=run_id,
                tree=tree.model_dump(mode="json"),
                settings=settings.model_dump(mode="json"),
                agent=agent,
                agent_options=dict(agent_options or {}),
                sandbox=sandbox,
            ),
            fence=fence,
        )
    except FileExistsError:
        raise _holds_a_run(project) from None
    try:
        project.write_state(fold([event]))
    except FileNotFoundError:
        if fence is not None:
            fence()  # taken over meanwhile: the fence says so
        raise
    return run_id


def _holds_a_run(project: ProjectDir) -> RunDirError:
    return RunDirError(
        f"{project.root}: already holds a run; use `pact status` or `pact resume`, "
        "or choose another --project directory"
    )


def load_state(project: ProjectDir) -> tuple[RunState, list[str]]:
    """The state the audit log says: state.json's snapshot plus the log's tail when
    the snapshot's mark matches the log, else a fold of the whole log.

    Raises:
        RunDirError: there is no log, or it holds no run (empty, or another tool's).
    """
    state, warnings, _ = load_run(project)
    return state, warnings


def load_run(project: ProjectDir) -> tuple[RunState, list[str], int | None]:
    """:func:`load_state`, and the last event (``seq``) of the intact snapshot that was
    its starting point (None: there was none, the whole log was folded)."""
    project.require_run()
    state, warnings, covered = load_folded(project)
    require_a_run(state, project, warnings)
    state.project_dir = str(project.root)
    state.warnings = warnings
    return state, warnings, covered


def require_a_run(state: RunState, project: ProjectDir, warnings: Sequence[str]) -> None:
    """Raise when the folded log has no ``run_started`` event: nothing can be shown,
    resumed or rebuilt from it, and it must not be mistaken for an empty run."""
    if state.tree is not None and state.run_id:
        return
    raise no_run(project.audit_path, state.last_seq, warnings)


def no_run(log: Path, readable: int, warnings: Sequence[str]) -> RunDirError:
    """The error for a log without a ``run_started`` event, of which ``readable`` events
    were read and ``warnings`` are the unreadable lines: why, and what to do."""
    unreadable = len(warnings)
    if unreadable and not readable:
        return RunDirError(
            f"{log}: not a pact-fleet run log (none of its {unreadable} lines is a "
            "pact-fleet event; a Pact project's own .pact/?)"
        )
    if unreadable:
        return RunDirError(
            f"{log}: holds no run it can read: the run_started event, which every other "
            f"event follows, is not among its readable lines ({unreadable} unreadable, the "
            f"first {warnings[0]}). If a backup of it exists, restore it; state.json is left "
            "as it is"
        )
    return RunDirError(
        f"{log}: holds no run (no run_started event); the log was emptied or cut. If a "
        "backup of it exists, restore it; state.json is left as it is"
    )
