"""Opening a run at scale: the run loop of `pact resume` starts from the state resume
folded, and an open checks the run's files from its log, not from the artifact store."""

from __future__ import annotations

from pathlib import Path

import pytest

from pact_workers.models import ItemStatus, Phase
from scheduler.audit import read_events
from scheduler.executors.simulated import SimulatedExecutor, VirtualClock
from scheduler.fold import fold
from scheduler.project import ProjectDir
from scheduler.rebuild import read_state_json, rebuild_state, validate_state_consistency
from scheduler.run import RunController
from scheduler.settings import Settings
from scheduler.snapshot import LogMark
from scheduler.state import RunState, RunStatus
from tests.runs import RunBuilder, counting_snapshot_reads, star_tree


def _paused_run(tmp_path: Path) -> Path:
    run = RunBuilder(tmp_path, star_tree(3))
    for cid in ("c1", "c2", "c3"):
        run.complete(cid)
    run.pause("waiting for a human")
    project = run.close()
    project.write_state(fold(read_events(project.audit_path)[0]))
    return project.root


def _controller(
    project: ProjectDir, loaded: tuple[RunState, LogMark] | None = None
) -> RunController:
    """A run loop over ``project`` on the simulated executor (opened by the caller)."""
    return RunController(
        project,
        executor=SimulatedExecutor(
            workers=2, store=project.store(), clock=VirtualClock(), latency=lambda c, p: 1.0
        ),
        store=project.store(),
        settings=Settings(),
        loaded=loaded,
    )


def test_the_run_loop_of_a_resume_starts_from_the_state_resume_wrote(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`pact resume` folds the log, logs run_resumed and writes its snapshot; the run
    loop then takes that state as it is, instead of reading state.json back (seconds
    at 10,000 components), and the run completes as before."""
    from typer.testing import CliRunner

    from scheduler.cli import app

    root = _paused_run(tmp_path)
    reads = counting_snapshot_reads(monkeypatch)
    res = CliRunner().invoke(app, ["resume", str(root), "--agent", "noop"])
    assert res.exit_code == 0, res.output
    assert len(reads) == 1  # resume's own load; before, the run loop read it again
    after = rebuild_state(root)
    assert after.status is RunStatus.COMPLETED
    written, problem = read_state_json(root)
    assert problem is None and written is not None
    assert written.last_seq == after.last_seq
    assert validate_state_consistency(written, root) == []


def test_a_run_loop_given_a_state_whose_log_moved_on_reads_the_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The state handed over is used only while the log still ends where its snapshot
    says; after any other append the run loop folds from disk."""
    from scheduler.launch import load_run
    from scheduler.snapshot import snapshot_mark

    project = ProjectDir(_paused_run(tmp_path))
    handed, _, _ = load_run(project)
    mark = snapshot_mark(project)
    assert mark is not None
    stale = (mark[0] - 1, mark[1])
    for given, expected_reads in ((stale, 1), (mark, 0)):
        reads = counting_snapshot_reads(monkeypatch)
        controller = _controller(project, loaded=(handed, given))
        controller.open()
        try:
            assert len(reads) == expected_reads
            assert (controller.state is handed) is (expected_reads == 0)
            assert controller.state.last_seq == handed.last_seq
        finally:
            controller.abandon()


def test_opening_a_run_finds_its_files_on_disk_without_reading_their_manifests(
    tmp_path: Path, example: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The run loop checks every verified item's files on open (and promotes again what
    went missing) from the file lists in the log, not from manifests in the store (a
    read of each at 10,000 components took a second)."""
    from typer.testing import CliRunner

    from pact_workers.artifacts import ArtifactStore
    from scheduler.cli import app

    root = tmp_path / "project"
    res = CliRunner().invoke(
        app, ["run", str(example / "tree.json"), "--project", str(root), "--agent", "noop"]
    )
    assert res.exit_code == 0, res.output
    project = ProjectDir(root)
    state = rebuild_state(root)
    done = [i for i in state.items.values() if i.status is ItemStatus.DONE]
    assert all(i.files for i in done) and len(done) > 20
    lost = next(i for i in done if i.phase is Phase.IMPLEMENT)
    missing = project.destination(lost.component_id, lost.phase) / lost.files[0].split("/", 1)[1]
    missing.unlink()
    read: list[str] = []
    get_manifest = ArtifactStore.get_manifest

    def counted(self: ArtifactStore, digest: str) -> dict[str, str]:
        read.append(digest)
        return get_manifest(self, digest)

    monkeypatch.setattr(ArtifactStore, "get_manifest", counted)
    controller = _controller(project)
    controller.open()
    try:
        assert missing.is_file()  # promoted again from the store
        # Only that promotion read a manifest (its bundle's); the checks of the other
        # 29 verified items read none.
        assert read == [lost.output]
    finally:
        controller.abandon()
