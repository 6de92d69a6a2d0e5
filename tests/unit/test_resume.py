"""Resume (seed 000, 1.1) and rebuild (seed 000, 1.5) on run directories built event by event."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from pact_workers.models import ItemStatus, Phase
from scheduler.audit import read_events, scan_events
from scheduler.events import Event, RunCompleted, RunResumed
from scheduler.fold import fold
from scheduler.provenance.promotion import restore_provenance
from scheduler.rebuild import read_state_json, rebuild_state, validate_state_consistency
from scheduler.resume import compute_resume_strategy, execute_resume
from scheduler.state import RunState, RunStatus
from tests.runs import RunBuilder, star_tree


def failed_at_implement(root: Path) -> RunBuilder:
    """Seven components: three implemented, c4's implementation failed for good."""
    run = RunBuilder(root, star_tree(6))
    for cid in ("c1", "c2", "c3"):
        run.complete(cid)
    for cid in ("c4", "c5", "c6", "root"):
        run.succeed(cid, Phase.CONTRACT)
        run.succeed(cid, Phase.TEST)
    run.fail(
        "c4",
        Phase.IMPLEMENT,
        "ModuleNotFoundError: No module named 'x'",
        poisoned=[("root", Phase.INTEGRATE)],
    )
    run.fail_run("c4/implement failed")
    return run


def snapshot(root: Path) -> dict[str, bytes]:
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file()
        and "artifacts" not in p.parts
        and p.name not in {"audit.jsonl", "state.json", "audit.lock"}
    }


def test_resume_from_failed_implement(tmp_path: Path) -> None:
    project = failed_at_implement(tmp_path).close()
    state = rebuild_state(project.root)
    assert state.status is RunStatus.FAILED
    strategy = compute_resume_strategy(state, project)
    assert strategy.resume_phase == "implement"
    assert strategy.completed_components == ["c1", "c2", "c3"]
    assert strategy.last_checkpoint == "root"  # its tests were the last item done
    assert ("c4", Phase.IMPLEMENT) in strategy.reset_items
    assert ("root", Phase.INTEGRATE) in strategy.reset_items


def test_resume_from_paused(tmp_path: Path) -> None:
    run = RunBuilder(tmp_path, star_tree(2))
    run.pause("waiting for a human answer about the input format")
    project = run.close()
    state = rebuild_state(project.root)
    strategy = compute_resume_strategy(state, project)
    assert strategy.resume_phase == "interview"
    resumed = execute_resume(state, strategy)
    assert resumed.status is RunStatus.ACTIVE
    assert resumed.phase == "interview"
    assert resumed.pause_reason == ""


def test_resume_active_raises(tmp_path: Path) -> None:
    project = RunBuilder(tmp_path, star_tree(2)).close()
    with pytest.raises(ValueError, match="already active"):
        compute_resume_strategy(rebuild_state(project.root), project)


def test_resume_preserves_completed_work(tmp_path: Path) -> None:
    project = failed_at_implement(tmp_path).close()
    before = snapshot(project.root)
    state = rebuild_state(project.root)
    resumed = execute_resume(state, compute_resume_strategy(state, project))
    assert snapshot(project.root) == before
    for cid in ("c1", "c2", "c3"):
        assert resumed.item(cid, Phase.IMPLEMENT).status is ItemStatus.DONE
    # Reset: c4's prerequisites are done (ready), root's integration waits for c4.
    assert resumed.item("c4", Phase.IMPLEMENT).status is ItemStatus.READY
    assert resumed.item("root", Phase.INTEGRATE).status is ItemStatus.PENDING
    assert resumed.item("root", Phase.INTEGRATE).poisoned_by is None


def test_resume_audit_entry(tmp_path: Path) -> None:
    project = failed_at_implement(tmp_path).close()
    state = rebuild_state(project.root)
    execute_resume(state, compute_resume_strategy(state, project))
    events, _ = read_events(project.audit_path)
    entry = events[-1]
    assert isinstance(entry, RunResumed)
    assert entry.ts and entry.original_status == "failed"
    assert entry.original_reason == "c4/implement failed"
    on_disk = read_state_json(project.root)[0]
    assert on_disk is not None
    assert on_disk.model_dump() == rebuild_state(project.root).model_dump()


def test_resume_never_moves_past_the_failure(tmp_path: Path) -> None:
    project = failed_at_implement(tmp_path).close()
    state = rebuild_state(project.root)
    with pytest.raises(ValueError, match="past the point of failure"):
        compute_resume_strategy(state, project, from_phase="integrate")
    strategy = compute_resume_strategy(state, project, from_phase="contract")
    assert strategy.resume_phase == "contract"
    with pytest.raises(ValueError, match="unknown phase"):
        compute_resume_strategy(state, project, from_phase="shipping")


def test_rebuild_from_clean_audit(tmp_path: Path) -> None:
    run = RunBuilder(tmp_path, star_tree(2))
    run.complete("c1")  # 3 items x 3 events
    run.complete("c2")
    run.succeed("root", Phase.CONTRACT)
    project = run.close()
    events, _ = read_events(project.audit_path)
    assert len(events) == 1 + 9 + 9 + 3
    state = rebuild_state(project.root)
    assert state.item("c1", Phase.IMPLEMENT).status is ItemStatus.DONE
    assert state.item("c2", Phase.IMPLEMENT).status is ItemStatus.DONE
    assert state.item("root", Phase.CONTRACT).status is ItemStatus.DONE
    assert state.item("root", Phase.TEST).status is ItemStatus.READY  # its contract is done
    assert state.usage.input_tokens == 7 * 100 and state.usage.cost_usd == pytest.approx(0.07)
    assert state.phase == "contract" and state.last_seq == len(events)


def test_rebuild_matches_state_json(tmp_path: Path) -> None:
    project = failed_at_implement(tmp_path).close()
    project.write_state(fold(read_events(project.audit_path)[0]))
    on_disk, _ = read_state_json(project.root)
    assert on_disk is not None
    assert on_disk.model_dump() == rebuild_state(project.root).model_dump()
    assert validate_state_consistency(on_disk, project.root) == []


def test_rebuild_detects_drift(tmp_path: Path) -> None:
    project = failed_at_implement(tmp_path).close()
    state = rebuild_state(project.root)
    corrupt = state.model_copy(deep=True)
    corrupt.items["c2/implement"].status = ItemStatus.FAILED
    corrupt.usage = corrupt.usage.model_copy(update={"cost_usd": 99.0})
    corrupt.status = RunStatus.COMPLETED
    problems = validate_state_consistency(corrupt, project.root)
    assert any("c2/implement" in p and "failed" in p for p in problems)
    assert any(p.startswith("cost") for p in problems)
    assert any(p.startswith("status") for p in problems)


def test_validate_missing_implementation(tmp_path: Path) -> None:
    project = failed_at_implement(tmp_path).close()
    (project.implementations_dir / "c1" / "src" / "c1.py").unlink()
    problems = validate_state_consistency(rebuild_state(project.root), project.root)
    assert problems == [
        "c1/implement: marked done but its implementation "
        ".pact/implementations/c1/src/c1.py is missing on disk"
    ]


def test_rebuild_of_a_corrupt_log_is_partial_with_warnings(tmp_path: Path) -> None:
    project = failed_at_implement(tmp_path).close()
    lines = project.audit_path.read_bytes().split(b"\n")
    lines[5] = b"{not json"
    project.audit_path.write_bytes(b"\n".join(lines))
    state = rebuild_state(project.root)
    assert len(state.warnings) == 1 and ":6:" in state.warnings[0]
    assert state.run_id


def test_rebuild_without_a_log_raises(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="no pact run"):
        rebuild_state(tmp_path)


@pytest.fixture
def whole_log_reads(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """The audit logs read from their first byte (a fold of the whole log), in order."""
    from scheduler import rebuild, snapshot

    reads: list[Path] = []

    def counted(path: Path, warnings: list[str], *, offset: int = 0) -> Iterator[Event]:
        if offset == 0:
            reads.append(path)
        return scan_events(path, warnings, offset=offset)

    monkeypatch.setattr(rebuild, "scan_events", counted)
    monkeypatch.setattr(snapshot, "scan_events", counted)
    return reads


def test_rebuild_and_status_fold_a_large_log_once(
    tmp_path: Path, whole_log_reads: list[Path]
) -> None:
    """`pact rebuild` and `pact status` without a usable snapshot compare state.json
    with the fold of the whole log they just made, instead of folding it a second time
    (at 10,000 components a fold takes seconds)."""
    from typer.testing import CliRunner

    from scheduler.cli import app

    project = failed_at_implement(tmp_path).close()
    folded = fold(read_events(project.audit_path)[0])
    # The sidecars a real run leaves beside its promoted files (the builder writes none).
    restore_provenance(project, folded, project.store())
    # state.json as an older version wrote it, without the mark of the log it covers.
    project.state_path.write_text(folded.model_dump_json())
    whole_log_reads.clear()  # what making the run read is not the command's
    res = CliRunner().invoke(app, ["rebuild", str(project.root), "--dry-run"])
    assert res.exit_code == 0, res.output
    assert "matches the audit log" in res.output
    assert len(whole_log_reads) == 1

    # Such a state.json is no starting point: status folds the whole log and checks
    # state.json against that fold.
    whole_log_reads.clear()
    res = CliRunner().invoke(app, ["status", str(project.root), "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.output)["inconsistencies"] == []
    assert len(whole_log_reads) == 1


def test_resuming_a_completed_run_says_so_without_folding_the_whole_log(
    tmp_path: Path, whole_log_reads: list[Path]
) -> None:
    """`pact resume` on a completed run answers from the snapshot and the log's tail: the
    check of state.json against the whole log (seconds at 10,000 components) comes only
    once there is something to resume."""
    from typer.testing import CliRunner

    from scheduler.cli import app

    run = RunBuilder(tmp_path, star_tree(2))
    run.complete("c1")
    run.complete("c2")
    run.complete("root", Phase.INTEGRATE)
    run.log(RunCompleted())
    project = run.close()
    project.write_state(fold(read_events(project.audit_path)[0]))
    whole_log_reads.clear()
    res = CliRunner().invoke(app, ["resume", str(project.root), "--agent", "noop"])
    assert res.exit_code == 2
    assert "already complete" in res.output
    assert whole_log_reads == []


def test_resuming_from_a_snapshot_behind_the_log_repairs_only_the_disk(
    tmp_path: Path, whole_log_reads: list[Path]
) -> None:
    """A killed run's state.json is its last snapshot, behind the log by design. `pact
    resume` carries on from it and the log's tail: it does not fold the whole log to
    compare state.json with, nor call the lag an inconsistency (it reported every item
    done since the snapshot as "repaired on resume"); a verified file gone from the disk
    is still reported, and recorded in run_resumed."""
    from typer.testing import CliRunner

    from scheduler.cli import app

    run = RunBuilder(tmp_path, star_tree(2))
    run.complete("c1")
    run.project.write_state(fold(read_events(run.project.audit_path)[0]))
    run.complete("c2")
    run.succeed("root", Phase.CONTRACT)
    project = run.close()  # still active: the process that drove it was killed
    (project.contracts_dir / "c2" / "interface.json").unlink()
    whole_log_reads.clear()
    res = CliRunner().invoke(app, ["resume", str(project.root), "--agent", "noop"])
    assert res.exit_code == 0, res.output
    repaired = [line for line in res.output.splitlines() if "repaired on resume" in line]
    assert len(repaired) == 1, res.output
    assert "c2/contract" in repaired[0] and "missing on disk" in repaired[0]
    assert whole_log_reads == []
    events, _ = read_events(project.audit_path)
    resumed = [e for e in events if isinstance(e, RunResumed)]
    assert len(resumed) == 1 and len(resumed[0].inconsistencies) == 1
    assert "c2/contract" in resumed[0].inconsistencies[0]
    assert rebuild_state(project.root).status is RunStatus.COMPLETED
    assert (project.contracts_dir / "c2" / "interface.json").is_file()  # repaired


def test_a_run_resumed_from_an_up_to_date_snapshot_does_not_write_it_again_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`pact resume` writes the snapshot of its run_resumed; the run loop that then opens
    the run counts the next periodic snapshot from that one, instead of writing state.json
    again at its first turn (at 10,000 components each write takes over a second)."""
    from typer.testing import CliRunner

    from scheduler import journal
    from scheduler.cli import app
    from scheduler.project import ProjectDir

    monkeypatch.setattr(journal, "SNAPSHOT_EVERY_EVENTS", 30)
    monkeypatch.setattr(journal, "SNAPSHOT_EVERY_S", 3600.0)  # counted in events only
    run = RunBuilder(tmp_path, star_tree(3))
    for cid in ("c1", "c2", "c3"):
        run.complete(cid)
    run.succeed("root", Phase.CONTRACT)
    run.succeed("root", Phase.TEST)
    run.pause("waiting for a human")
    project = run.close()
    before = fold(read_events(project.audit_path)[0])
    assert before.last_seq >= 30  # a snapshot would be due at once, counted from 0
    project.write_state(before)
    written: list[int] = []
    write_state = ProjectDir.write_state

    def counted(self: ProjectDir, state: RunState, log_offset: int | None = None) -> None:
        written.append(state.last_seq)
        write_state(self, state, log_offset=log_offset)

    monkeypatch.setattr(ProjectDir, "write_state", counted)
    res = CliRunner().invoke(app, ["resume", str(project.root), "--agent", "noop"])
    assert res.exit_code == 0, res.output
    after = rebuild_state(project.root)
    assert after.status is RunStatus.COMPLETED
    assert after.last_seq - before.last_seq < 30  # no periodic snapshot was due
    # run_resumed's, then the final one: none in between.
    assert written == [before.last_seq + 1, after.last_seq]


def test_a_second_resume_between_the_first_ones_checks_and_its_drive_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`pact resume` holds the run from its checks to the end of its drive. It used to
    let the run go between logging run_resumed and driving: a second resume that came
    in then logged a second run_resumed, of the state it had read, and drove the run
    itself; the first then drove what was left."""
    from typer.testing import CliRunner

    from scheduler.cli import app
    from scheduler.commands import resuming

    project = failed_at_implement(tmp_path).close()
    second: list[tuple[int, str]] = []

    def then_another(*args: object, **kwargs: object) -> RunState:
        resumed = execute_resume(*args, **kwargs)  # type: ignore[arg-type]
        res = CliRunner().invoke(app, ["resume", str(project.root), "--agent", "noop"])
        second.append((res.exit_code, res.output))
        return resumed

    monkeypatch.setattr(resuming, "execute_resume", then_another)
    res = CliRunner().invoke(app, ["resume", str(project.root), "--agent", "noop"])
    assert res.exit_code == 0, res.output
    [(code, output)] = second
    assert code == 2 and "another pact process is driving this run" in output, output
    events, _ = read_events(project.audit_path)
    assert sum(isinstance(e, RunResumed) for e in events) == 1
    assert rebuild_state(project.root).status is RunStatus.COMPLETED
