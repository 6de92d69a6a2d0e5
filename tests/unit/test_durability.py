"""What a run makes durable, and in which order: nothing is committed to the log before
what it names is on disk, with one file-system sync per commit instead of an fsync
per file (blobs the store deferred, files promoted into the project)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from bench.trees import synthetic_tree
from pact_workers import files
from pact_workers.models.tree import tree_from_data
from pact_workers.models.work import ItemStatus, Phase
from scheduler.audit import AuditLog
from scheduler.executors.simulated import SimulatedExecutor, VirtualClock
from scheduler.launch import start_run
from scheduler.project import ProjectDir
from scheduler.run import RunController
from scheduler.settings import Settings


def _drive(root: Path, components: int = 12) -> tuple[ProjectDir, Any]:
    data = synthetic_tree(components, 3)
    tree = tree_from_data(data, "<synthetic>")
    project = ProjectDir(root)
    project.root.mkdir()
    settings = Settings()
    start_run(project, tree, tree_bytes=json.dumps(data).encode(), settings=settings)
    clock = VirtualClock()
    store = project.store(deferred=True)
    executor = SimulatedExecutor(
        workers=4, store=store, clock=clock, latency=lambda c, p: 60.0, verified=True
    )
    state = RunController(
        project, executor=executor, store=store, settings=settings, clock=clock, sleep=clock.sleep
    ).drive()
    return project, state


def test_promoted_files_are_synced_before_the_commit_that_says_they_were_promoted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every commit of an ``artifacts_promoted`` event comes after a sync of the
    project's file system that followed the promotion it records; promotion itself
    fsyncs no file."""
    trace: list[str] = []
    real_sync = files.sync_filesystem
    real_commit = AuditLog.commit
    real_promote = ProjectDir.promote
    real_fsync = os.fsync

    def sync(path: Path) -> None:
        trace.append("sync")
        real_sync(path)

    def commit(self: AuditLog) -> None:
        promoted = sum(b'"artifacts_promoted"' in line for line in self._staged)
        trace.extend(["commit-promoted"] * promoted)
        if self._staged:
            trace.append("commit")
        real_commit(self)

    in_promote = [False]

    def promote(self: ProjectDir, *args: Any, **kwargs: Any) -> list[str]:
        in_promote[0] = True
        try:
            return real_promote(self, *args, **kwargs)
        finally:
            in_promote[0] = False
            trace.append("promote")

    def fsync(fd: int) -> None:
        assert not in_promote[0], "promotion fsyncs a file"
        real_fsync(fd)

    monkeypatch.setattr(files, "sync_filesystem", sync)
    monkeypatch.setattr(AuditLog, "commit", commit)
    monkeypatch.setattr(ProjectDir, "promote", promote)
    monkeypatch.setattr(os, "fsync", fsync)

    _, state = _drive(tmp_path / "run")

    assert all(i.status is ItemStatus.DONE and i.promoted for i in state.items.values())
    promotions = trace.count("promote")
    assert promotions == len(state.items) and trace.count("commit-promoted") == promotions
    # Before each commit of promoted events: every promotion so far, then a sync.
    pending = 0
    synced = True
    for step in trace:
        if step == "promote":
            pending += 1
            synced = False
        elif step == "sync":
            synced = True
        elif step == "commit-promoted":
            assert synced, "a promotion was committed before its files were synced"
            pending -= 1
    assert pending == 0
    # One sync per commit at most (the blobs and the project share a file system),
    # not one per file.
    assert trace.count("sync") <= trace.count("commit")


class _Crash(Exception):
    pass


def test_an_unsynced_promotion_the_log_never_recorded_is_promoted_again_on_resume(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The scheduler dies after promoting an implementation and before the commit that
    records it: its files were never synced and may be torn by a power loss (here: one
    is emptied). The log does not say they were promoted, so opening the run again
    promotes them again from the store."""
    real_commit = AuditLog.commit
    crashed: list[bytes] = []

    def commit(self: AuditLog) -> None:
        for line in self._staged:
            if not crashed and b'"artifacts_promoted"' in line and b'"implement"' in line:
                crashed.append(line)
                raise _Crash
        real_commit(self)

    monkeypatch.setattr(AuditLog, "commit", commit)
    with pytest.raises(_Crash):
        _drive(tmp_path / "run")
    monkeypatch.setattr(AuditLog, "commit", real_commit)
    event = json.loads(crashed[0])
    cid = event["component_id"]
    project = ProjectDir(tmp_path / "run")
    src = project.destination(cid, Phase.IMPLEMENT)
    victim = next(p for p in sorted(src.rglob("*")) if p.is_file())
    good = victim.read_bytes()
    assert good
    victim.write_bytes(b"")  # what an unsynced file can hold after a power loss

    store = project.store(deferred=True)
    clock = VirtualClock()
    executor = SimulatedExecutor(workers=4, store=store, clock=clock, latency=lambda c, p: 60.0)
    controller = RunController(
        project, executor=executor, store=store, settings=Settings(), clock=clock
    )
    assert not _promoted_in_log(project, cid)
    controller.open()
    controller.close()
    assert victim.read_bytes() == good
    assert _promoted_in_log(project, cid)


def _promoted_in_log(project: ProjectDir, component_id: str) -> bool:
    for line in project.audit_path.read_bytes().splitlines():
        event = json.loads(line)
        if (
            event["type"] == "artifacts_promoted"
            and event["component_id"] == component_id
            and event["phase"] == "implement"
        ):
            return True
    return False


def test_deferred_writes_are_synced_once_per_file_system_and_only_when_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    synced: list[str] = []
    monkeypatch.setattr(files, "sync_filesystem", lambda path: synced.append(str(path)))
    deferred = files.DeferredSync()
    deferred.sync()
    assert synced == []  # nothing written: no sync
    (tmp_path / "blobs").mkdir()
    (tmp_path / "project").mkdir()
    deferred.wrote(str(tmp_path / "blobs"))
    deferred.wrote(str(tmp_path / "project"))  # the same file system
    assert deferred.pending()
    deferred.sync()
    assert synced == [str(tmp_path / "blobs")] and not deferred.pending()
    deferred.sync()
    assert len(synced) == 1


def test_periodic_snapshots_are_written_and_cover_exactly_the_committed_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After each commit with a success, promotions stage their records: a periodic
    snapshot that falls due then commits them first, so snapshots are still written
    during a run, each of a state that is exactly the log on disk."""
    from scheduler import journal

    monkeypatch.setattr(journal, "SNAPSHOT_EVERY_EVENTS", 1)
    written: list[int] = []
    real = ProjectDir.write_state

    def write_state(self: ProjectDir, state: Any, **kwargs: Any) -> None:
        on_disk = self.audit_path.read_bytes().splitlines()
        assert json.loads(on_disk[-1])["seq"] == state.last_seq
        written.append(state.last_seq)
        real(self, state, **kwargs)

    monkeypatch.setattr(ProjectDir, "write_state", write_state)
    _, state = _drive(tmp_path / "run", components=40)
    # Every run-size of events (120 items here), besides the first and the last.
    assert len(written) >= 4 and written[-1] == state.last_seq
