"""The audit log is durable and the state is a fold over it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pact_workers.errors import RunDirError
from pact_workers.models import ErrorClass, ItemStatus, Phase, Usage
from scheduler.audit import AuditLog, read_events
from scheduler.events import ItemDispatched, ItemFailed, ItemSucceeded, RunStarted
from scheduler.fold import fold
from tests.unit.test_wavefront import make_tree

TREE = make_tree({"A": ["B", "C"]}, {"C": ["B"]}).model_dump(mode="json")


def events() -> list[object]:
    return [
        RunStarted(run_id="r1", tree=TREE),
        ItemDispatched(component_id="B", phase=Phase.CONTRACT, attempt=1, role="contract_author"),
        ItemSucceeded(
            component_id="B",
            phase=Phase.CONTRACT,
            attempt=1,
            output="sha256:x",
            usage=Usage(input_tokens=10, output_tokens=5, cost_usd=0.5),
        ),
        ItemDispatched(component_id="C", phase=Phase.CONTRACT, attempt=1, role="contract_author"),
        ItemFailed(
            component_id="C",
            phase=Phase.CONTRACT,
            attempt=1,
            error_class=ErrorClass.TRANSIENT,
            error="reset",
            decision="retry",
            retry_at=5.0,
            usage=Usage(cost_usd=0.25),
        ),
    ]


def test_events_round_trip_through_the_log(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    with AuditLog(path) as log:
        stored = [log.append(e) for e in events()]  # type: ignore[type-var]
    assert [e.seq for e in stored] == [1, 2, 3, 4, 5]
    read, warnings = read_events(path)
    assert read == stored and warnings == []


def test_state_is_a_fold_and_replaying_an_event_changes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    with AuditLog(path) as log:
        stored = [log.append(e) for e in events()]  # type: ignore[type-var]
    state = fold(stored)
    assert state.item("B", "contract").status is ItemStatus.DONE
    c = state.item("C", "contract")
    # Waiting to retry, its prerequisites met: ready (the retry time holds it back).
    assert c.status is ItemStatus.READY and c.retry_at == 5.0 and c.transient_failures == 1
    assert state.usage.cost_usd == pytest.approx(0.75)
    assert state.spend_by_phase == {"contract": pytest.approx(0.75)}
    again = fold(stored, state.model_copy(deep=True))
    assert again == state


def test_a_torn_last_line_is_trimmed_by_the_writer(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    with AuditLog(path) as log:
        for e in events()[:2]:
            log.append(e)  # type: ignore[type-var]
    with path.open("ab") as fh:
        fh.write(b'{"type": "item_succ')
    _, warnings = read_events(path)
    assert len(warnings) == 1 and "torn" in warnings[0]
    with AuditLog(path) as log:
        assert log.last_seq == 2
        log.append(events()[2])  # type: ignore[type-var]
    read, warnings = read_events(path)
    assert [e.seq for e in read] == [1, 2, 3] and warnings == []


def test_only_one_writer_at_a_time(tmp_path: Path) -> None:
    path = tmp_path / ".pact" / "audit.jsonl"
    with AuditLog(path), pytest.raises(RunDirError, match="another pact process"):
        AuditLog(path).open()


def test_missing_log_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(RunDirError, match="no audit log"):
        read_events(tmp_path / "audit.jsonl")


def test_the_startup_sweep_removes_what_a_crash_left_mid_promotion(tmp_path: Path) -> None:
    from pact_workers.models.testing import TestResults
    from scheduler.project import ProjectDir

    project = ProjectDir(tmp_path)
    project.promote("a", Phase.CONTRACT, {"interface.json": b"{}"})
    project.promote("a", Phase.IMPLEMENT, {"src/a.py": b"x = 1\n"}, TestResults(total=1, passed=1))
    kept = sorted(p for p in tmp_path.rglob("*") if p.is_file())
    # What a SIGKILL between an atomic write's temporary file and its rename leaves.
    leftovers = [
        project.contracts_dir / "a" / ".interface.json.k2j4x9",
        project.implementations_dir / "a" / ".test_results.json.m241ur55",
        project.implementations_dir / "a" / ".src.new-q1w2e3" / "a.py",
        project.implementations_dir / "a" / f".src.old-{os.getpid()}" / "a.py",
        project.state_path.parent / f".{project.state_path.name}.z9y8x7",
        # A provenance sidecar's and a baseline's (a SIGKILL mid-run left the first).
        project.contracts_dir / "a" / ".interface.meta.json.22086.35",
        project.pact / "baselines" / ".a.json.22086.36",
    ]
    for path in leftovers:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"half")
    project.sweep_staging()
    assert sorted(p for p in tmp_path.rglob("*") if p.is_file()) == kept


def _log_with_checks(tmp_path: Path) -> Path:
    """A run's log holding two contract checks, other events, one whose text quotes the
    contract_checked type (escaped in its JSON string, so no match), and a torn line."""
    from scheduler.events import ContractChecked
    from tests.runs import RunBuilder, star_tree

    run = RunBuilder(tmp_path, star_tree(2))
    for cid in ("c1", "c2"):
        run.log(ContractChecked(component_id=cid, phase=Phase.CONTRACT, attempt=1, digest="d"))
        run.complete(cid)
    run.pause('a reason quoting "type":"contract_checked"')
    project = run.close()
    with project.audit_path.open("ab") as fh:
        fh.write(b'{"seq":99,"type":"item_dispa')  # a crash mid-write
    return project.root


def test_reading_only_some_types_parses_only_the_lines_that_can_hold_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from scheduler import audit

    root = _log_with_checks(tmp_path)
    log = root / ".pact" / "audit.jsonl"
    everything, torn = read_events(log)
    assert len(torn) == 1  # the whole read reports the torn line
    parsed: list[bytes] = []
    parse = audit.parse_event
    monkeypatch.setattr(audit, "parse_event", lambda line: parsed.append(line) or parse(line))
    found, warnings = read_events(log, types=("run_started", "contract_checked"))
    assert [e.type for e in found] == ["run_started", "contract_checked", "contract_checked"]
    assert found == [e for e in everything if e.type in {"run_started", "contract_checked"}]
    assert warnings == []  # the torn line cannot hold either type: not even read
    assert len(parsed) == 3  # run_started and the two checks; no other line
    assert len(everything) > 3 * 4


def test_pact_validate_of_a_run_parses_only_its_contract_checks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Through the CLI: validating a run reads its log's run_started and contract
    checks, not every event (most of the time of a 10,000-component validation)."""
    from typer.testing import CliRunner

    from scheduler import audit
    from scheduler.cli import app

    root = _log_with_checks(tmp_path)
    parsed: list[bytes] = []
    parse = audit.parse_event
    monkeypatch.setattr(audit, "parse_event", lambda line: parsed.append(line) or parse(line))
    res = CliRunner().invoke(app, ["validate", str(root), "--json"])
    assert res.exit_code in (0, 1), res.output
    assert len(parsed) == 3, [line[:40] for line in parsed]
