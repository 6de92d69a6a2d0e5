"""A fold of the whole log (``pact rebuild``, ``pact status`` and an opening run
without a usable snapshot) reads the log one line at a time: the parsed events of a
10,000-component log took 300 MB more than the state they fold to. The result is the
one of reading the log first: strict when it is intact, as far as it goes when a line
of it is unreadable, wherever that line is."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError
from typer.testing import CliRunner

from pact_workers.models import ItemStatus, Phase
from scheduler import snapshot
from scheduler.audit import scan_events
from scheduler.cli import app
from scheduler.lifecycle.damaged import fold_as_read
from scheduler.lifecycle.machine import IllegalTransition
from scheduler.project import ProjectDir
from scheduler.rebuild import rebuild_state
from scheduler.snapshot import load_folded
from scheduler.state import RunState
from tests.runs import RunBuilder, counting_snapshot_reads, star_tree


def finished_run(root: Path) -> ProjectDir:
    run = RunBuilder(root, star_tree(3))
    for cid in ("c1", "c2", "c3"):
        run.complete(cid)
    return run.close()


def lines_of(project: ProjectDir) -> list[bytes]:
    return project.audit_path.read_bytes().splitlines(keepends=True)


def refuse_first_success(lines: list[bytes]) -> int:
    """Make the log's first success name an attempt never dispatched (the lifecycle
    refuses it, and the events of that item after it); returns its line's index."""
    for index, line in enumerate(lines):
        event = json.loads(line)
        if event["type"] == "item_succeeded":
            event["attempt"] = 7
            lines[index] = json.dumps(event).encode() + b"\n"
            return index
    raise AssertionError("no success in the log")


def test_a_full_fold_reads_the_log_one_line_at_a_time(tmp_path: Path) -> None:
    project = finished_run(tmp_path)
    lines = lines_of(project)
    lines[-1] = b"{not json\n"
    project.audit_path.write_bytes(b"".join(lines))
    warnings: list[str] = []
    events = scan_events(project.audit_path, warnings)
    first = next(events)
    # The first event came before the reader reached the unreadable last line.
    assert first.type == "run_started" and warnings == []
    assert len(list(events)) == len(lines) - 2
    assert len(warnings) == 1 and f":{len(lines)}: unreadable event" in warnings[0]
    assert warnings[0].endswith(
        "unreadable event: Invalid JSON: key must be a string at line 1 column 2"
    )


def test_an_unreadable_event_is_named_by_its_field_and_a_tail_line_by_its_offset(
    tmp_path: Path,
) -> None:
    project = finished_run(tmp_path)
    start = project.audit_path.stat().st_size
    with project.audit_path.open("ab") as fh:
        fh.write(b'{"type": "item_failed", "seq": 9999}\n')
    warnings: list[str] = []
    assert list(scan_events(project.audit_path, warnings, offset=start)) == []
    assert warnings == [
        f"{project.audit_path}, line 1 after byte {start}: unreadable event: "
        "component_id: Field required"
    ]


def test_an_intact_log_with_an_event_the_lifecycle_refuses_is_an_error(tmp_path: Path) -> None:
    project = finished_run(tmp_path)
    lines = lines_of(project)
    refuse_first_success(lines)
    project.audit_path.write_bytes(b"".join(lines))
    with pytest.raises(IllegalTransition, match="attempt 7|lease_current"):
        rebuild_state(project.root)
    res = CliRunner().invoke(app, ["rebuild", str(project.root), "--dry-run"])
    assert res.exit_code == 2, res.output
    assert "lease_current" in res.output and "Traceback" not in res.output


def test_a_damaged_log_is_folded_as_far_as_it_goes_even_when_the_lost_line_comes_later(
    tmp_path: Path,
) -> None:
    """The refused event comes before the unreadable line: read first, the log was
    known to be damaged before the fold began; read as it is folded, the refusal is
    decided once the damage is found."""
    project = finished_run(tmp_path)
    lines = lines_of(project)
    refused = refuse_first_success(lines)
    lines[-1] = b"{not json\n"
    assert refused < len(lines) - 1
    project.audit_path.write_bytes(b"".join(lines))
    state = rebuild_state(project.root)
    assert len(state.warnings) == 1 and "unreadable event" in state.warnings[0]
    assert state.item("c1", Phase.CONTRACT).status is not ItemStatus.DONE
    assert state.item("c2", Phase.IMPLEMENT).status is ItemStatus.DONE
    project.state_path.unlink()  # no snapshot: status and an opening run fold it all
    folded, warnings, covered = load_folded(project)
    assert folded.model_dump(exclude={"warnings", "project_dir"}) == state.model_dump(
        exclude={"warnings", "project_dir"}
    )
    assert warnings == state.warnings and covered is None


def test_a_snapshot_whose_mark_does_not_match_the_log_is_not_parsed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = finished_run(tmp_path)
    parsed = counting_snapshot_reads(monkeypatch)
    mark = snapshot.snapshot_mark(project)
    assert mark is not None and snapshot.read_snapshot(project) is not None
    assert len(parsed) == 1
    # The log is not the one the snapshot covered (a backup of the log restored).
    lines = lines_of(project)
    lines[0] = lines[0].replace(b"{", b"{ ", 1)
    project.audit_path.write_bytes(b"".join(lines))
    assert snapshot.snapshot_mark(project) == mark
    parsed.clear()
    assert snapshot.read_snapshot(project) is None
    assert parsed == []


@pytest.mark.parametrize(
    ("damaged", "raised"), [(False, IllegalTransition), (True, ValidationError)]
)
def test_an_error_after_a_refused_event_is_raised_as_reading_the_log_first_would(
    tmp_path: Path, damaged: bool, raised: type[Exception]
) -> None:
    """Read first, an intact log raised its first refused event before folding on, and
    a damaged one skipped it and raised the next error of the fold. Here the log's
    first success is refused and the line after it starts the run again with a tree
    that is not one, which the fold cannot take (not a refusal); the last line is
    unreadable or not."""
    project = finished_run(tmp_path)
    lines = lines_of(project)
    refused = refuse_first_success(lines)
    broken = json.loads(lines[0])  # run_started
    broken["seq"] = json.loads(lines[refused + 1])["seq"]
    broken["tree"] = {"root_id": "x", "nodes": "not nodes"}
    lines[refused + 1] = json.dumps(broken).encode() + b"\n"
    if damaged:
        lines[-1] = b"{not json\n"
    project.audit_path.write_bytes(b"".join(lines))
    state = RunState()
    warnings: list[str] = []
    with pytest.raises(raised):
        fold_as_read(scan_events(project.audit_path, warnings), warnings, state)
    # Nothing after the error is folded: the state ends before the refused event.
    assert state.last_seq == json.loads(lines[refused])["seq"] - 1
    assert len(warnings) == (1 if damaged else 0)  # yet every line was read
