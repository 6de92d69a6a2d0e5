"""The bundled example project, run with the replay agent (``pact demo``)."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from importlib import resources
from pathlib import Path

from pact_workers.errors import RunDirError
from scheduler.commands.runs import run_tree
from scheduler.project import ProjectDir
from scheduler.run import Listener
from scheduler.state import RunState

EXAMPLE = "calculator"


@contextmanager
def example_dir(name: str = EXAMPLE) -> Iterator[Path]:
    """The bundled example as a real directory (package data may live in a zip)."""
    ref = resources.files("scheduler") / "examples" / name
    with resources.as_file(ref) as path:
        yield Path(path)


def run_demo(
    *, directory: Path | None, workers: int = 4, listener: Listener | None = None
) -> tuple[Path, RunState]:
    """Run the bundled example with the replay agent into a fresh directory."""
    if directory is None:
        directory = Path(tempfile.mkdtemp(prefix="pact-demo-"))
    elif directory.exists() and (not directory.is_dir() or any(directory.iterdir())):
        raise RunDirError(f"{directory}: the demo needs a new or empty directory")
    with example_dir() as example:
        project_dir = directory
        tree_copy = project_dir / "tree.json"
        state = None
        try:
            project_dir.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(example / "tree.json", tree_copy)
            state = run_tree(
                tree_path=tree_copy,
                project_dir=project_dir,
                replay_dir=example / "replay",
                workers=workers,
                listener=listener,
            )
        finally:
            if state is None and not ProjectDir(project_dir).has_run():
                shutil.rmtree(project_dir, ignore_errors=True)
    return project_dir, state
