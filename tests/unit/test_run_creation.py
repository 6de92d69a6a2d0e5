"""A run's log is created whole or not at all: a process killed while it creates a
run leaves either no run or one that holds ``run_started``, never an empty log that
no scheduler can open (seen in the failover test: a service killed between creating
the file and writing its first line left a run every other service failed to adopt)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pact_workers.errors import RunDirError
from pact_workers.models.tree import load_tree
from scheduler import audit
from scheduler.audit import read_events
from scheduler.events import RunStarted
from scheduler.executors.simulated import SimulatedExecutor, VirtualClock
from scheduler.intake import create_run
from scheduler.launch import load_state, start_run
from scheduler.project import ProjectDir
from scheduler.registry import Submission
from scheduler.run import RunController
from scheduler.settings import Settings


class Killed(BaseException):
    """The process dies here."""


def submission(example: Path, run_id: str = "r1") -> Submission:
    tree = example / "tree.json"
    return Submission(
        run_id=run_id, name="calc", tree_text=tree.read_text(), submitted_at="2026-01-01"
    )


def start(project: ProjectDir, example: Path) -> str:
    tree = example / "tree.json"
    return start_run(
        project, load_tree(tree), tree_bytes=tree.read_bytes(), settings=Settings(), run_id="r1"
    )


def test_a_creator_killed_before_the_log_is_linked_leaves_no_run(
    example: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = ProjectDir(tmp_path / "p")

    def die(*args: object) -> None:
        raise Killed

    with monkeypatch.context() as m:
        m.setattr(audit.os, "link", die)
        with pytest.raises(Killed):
            start(project, example)
    assert not project.has_run()
    assert start(project, example) == "r1"
    events, problems = read_events(project.audit_path)
    assert problems == [] and len(events) == 1
    assert isinstance(events[0], RunStarted) and events[0].seq == 1
    assert load_state(project)[0].run_id == "r1"
    assert [p.name for p in project.pact.iterdir() if p.name.startswith(".")] == []


def test_a_log_made_meanwhile_by_another_creator_is_left_as_it_is(
    example: Path, tmp_path: Path
) -> None:
    project = ProjectDir(tmp_path / "p")
    other = b'{"not": "ours"}\n'

    def the_other_was_quicker() -> None:
        project.audit_path.write_bytes(other)

    tree = example / "tree.json"
    with pytest.raises(RunDirError, match="already holds a run"):
        start_run(
            project,
            load_tree(tree),
            tree_bytes=tree.read_bytes(),
            settings=Settings(),
            fence=the_other_was_quicker,
        )
    assert project.audit_path.read_bytes() == other


def test_an_empty_log_left_by_a_killed_creator_is_made_again(example: Path, tmp_path: Path) -> None:
    project = ProjectDir(tmp_path / "p")
    project.audit_path.parent.mkdir(parents=True)
    project.audit_path.touch()  # what a creator killed after opening the file left
    create_run(project, submission(example))
    state, _ = load_state(project)
    assert state.run_id == "r1" and state.tree is not None
    create_run(project, submission(example, run_id="r2"))  # a run exists: left alone
    assert load_state(project)[0].run_id == "r1"


def test_a_run_that_cannot_be_opened_gets_no_snapshot(tmp_path: Path) -> None:
    project = ProjectDir(tmp_path / "p")
    project.audit_path.parent.mkdir(parents=True)
    project.audit_path.touch()
    clock = VirtualClock()
    store = project.store()
    controller = RunController(
        project,
        executor=SimulatedExecutor(workers=1, store=store, clock=clock, latency=lambda c, p: 1.0),
        store=store,
        settings=Settings(),
        clock=clock,
    )
    with pytest.raises(RunDirError, match="holds no run"):
        controller.open()
    assert not project.state_path.exists()
