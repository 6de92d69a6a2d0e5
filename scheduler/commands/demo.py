"""The bundled example project, run with the replay agent (``pact demo``)."""

from __future__ import annotations

import shutil
import tempfile
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from importlib import resources
from pathlib import Path

from pact_workers.errors import RunDirError
from scheduler.commands.plan import PlannedTask, plan_task
from scheduler.commands.rundir import created_by
from scheduler.commands.runs import run_tree
from scheduler.journal import Listener
from scheduler.project import ProjectDir
from scheduler.state import RunState

EXAMPLE = "calculator"


@contextmanager
def example_dir(name: str = EXAMPLE) -> Iterator[Path]:
    """The bundled example as a real directory (package data may live in a zip)."""
    ref = resources.files("scheduler") / "examples" / name
    with resources.as_file(ref) as path:
        yield Path(path)


def demo_directory(directory: Path | None) -> Path:
    """Where the demo runs: ``directory`` if new or empty (but for a ``pact.yaml``), else
    a fresh temporary one.

    Raises:
        RunDirError: ``directory`` exists and is not an empty directory.
    """
    if directory is None:
        return Path(tempfile.mkdtemp(prefix="pact-demo-"))
    # A pact.yaml put there first is the demo's settings (e.g. ``promote: git``).
    if directory.exists() and (
        not directory.is_dir() or any(p.name != "pact.yaml" for p in directory.iterdir())
    ):
        raise RunDirError(
            f"{directory}: the demo needs a new or empty directory (a pact.yaml alone is used)"
        )
    return directory


def run_demo(
    *,
    directory: Path | None,
    workers: int = 4,
    listener: Listener | None = None,
    stop: threading.Event | None = None,
    from_task: bool = False,
    on_plan: Callable[[PlannedTask], None] | None = None,
) -> tuple[Path, RunState]:
    """Run the bundled example with the replay agent into a new or empty directory.

    ``from_task``: start from the example's task instead of its tree: ``pact plan``
    with ``--approve`` (the replayed interview and decomposition; ``on_plan`` is shown
    the plan), then the run of the tree it wrote.
    """
    project_dir = demo_directory(directory)
    created = created_by(project_dir)
    with example_dir() as example:
        tree_copy = project_dir / "tree.json"
        state = None
        try:
            project_dir.mkdir(parents=True, exist_ok=True)
            if from_task:
                planned = plan_task(
                    task_path=example / "task.md",
                    project_dir=project_dir,
                    approve=True,
                    replay_dir=example / "replay",
                )
                if on_plan is not None:
                    on_plan(planned)
                tree_copy = planned.tree_path
            else:
                shutil.copyfile(example / "tree.json", tree_copy)
            state = run_tree(
                tree_path=tree_copy,
                project_dir=project_dir,
                agent_name="replay",
                replay_dir=example / "replay",
                workers=workers,
                listener=listener,
                stop=stop,
            )
        finally:
            if state is None and not ProjectDir(project_dir).has_run():
                # Leave nothing behind: what the demo made goes; a directory the
                # user made (empty, by the check above) stays, empty again.
                if created is not None:
                    shutil.rmtree(created, ignore_errors=True)
                else:
                    tree_copy.unlink(missing_ok=True)
                    shutil.rmtree(project_dir / "decomposition", ignore_errors=True)
    return project_dir, state
