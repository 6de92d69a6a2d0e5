"""Checks on project directories, before anything is written into or read from them.

``--project`` may name a path that cannot hold a run (under a regular file, on a
read-only or virtual file system such as /proc, a directory of another tool's
``.pact/``); every such case is an :class:`RunDirError` naming the path and what
to do, raised before the first write.
"""

from __future__ import annotations

import os
from pathlib import Path

from pact_workers.errors import RunDirError
from pact_workers.files import probe_directory
from scheduler.events import RunStarted, parse_event
from scheduler.project import ProjectDir


def created_by(path: Path) -> Path | None:
    """The outermost directory ``path.mkdir(parents=True)`` would create (None: exists)."""
    created = None
    current = path.absolute()
    while not current.exists() and not current.is_symlink():
        created = current
        if current.parent == current:
            break
        current = current.parent
    return created


def check_new_project_dir(project: ProjectDir) -> None:
    """``project`` can take a new run: a writable directory, or one that can be made.

    Raises:
        RunDirError: naming the path and the problem.
    """
    root = project.root
    where = f"--project {root}"
    if root.exists() and not root.is_dir():
        raise RunDirError(f"{where}: exists and is not a directory; choose a directory")
    if project.has_run() and _starts_a_run(project.audit_path):
        raise RunDirError(
            f"{where}: already holds a run; use `pact status {root}` to see it, "
            f"`pact resume {root}` to continue it, or choose another directory"
        )
    if project.pact.exists() or project.pact.is_symlink():
        raise RunDirError(
            f"{where}: holds a .pact directory that is not a pact-fleet run (a Pact project's "
            "own?); choose another directory so that nothing in it is overwritten"
        )
    existing = root.absolute()
    while not existing.exists():
        if existing.is_symlink():
            raise RunDirError(f"{where}: {existing} is a broken symbolic link")
        existing = existing.parent
    if not existing.is_dir():
        raise RunDirError(
            f"{where}: cannot be created because {existing} is a file, not a directory"
        )
    if not os.access(existing, os.W_OK | os.X_OK):
        raise RunDirError(
            f"{where}: {existing} is not writable by this user; choose a directory you can write"
        )
    try:
        probe_directory(existing)
    except OSError as exc:
        raise RunDirError(
            f"{where}: cannot write the run there: no file can be made in {existing} "
            f"({exc.strerror or exc}); choose a directory you can write"
        ) from None


def check_run_dir(project: ProjectDir, *, writes: bool = False) -> None:
    """``project`` is a directory with a pact-fleet run log that can be read; and, for a
    command that ``writes`` the run, a place for its state snapshot (before any event
    is appended that the snapshot could then not follow).

    Whether the log really holds a run is known only once it is read (see
    :func:`scheduler.launch.load_state`).

    Raises:
        RunDirError: naming the path and the problem.
    """
    project.require_run()
    log = project.audit_path
    if not log.is_file():
        raise RunDirError(f"{log}: is not a file; this is not a pact-fleet run")
    if not os.access(log, os.R_OK):
        raise RunDirError(f"{log}: not readable by this user")
    snapshot = project.state_path
    if writes and (snapshot.exists() or snapshot.is_symlink()) and not snapshot.is_file():
        raise RunDirError(
            f"{snapshot}: is not a file, and the run's state snapshot goes there; nothing "
            "was written: move it away, then run `pact rebuild`"
        )


def _starts_a_run(log: Path) -> bool:
    """True when the log's first line is a pact-fleet ``run_started`` event."""
    try:
        with log.open("rb") as fh:
            first = fh.readline()
        return isinstance(parse_event(first), RunStarted)
    except (OSError, ValueError):
        return False
