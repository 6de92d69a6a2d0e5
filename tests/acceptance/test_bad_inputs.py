"""Every bad input a user or a broken disk can give, through the CLI as a user runs it.

The corpus is ``tests/data/bad_inputs/cases.yaml`` (see its header). Each case runs
``pact`` in a subprocess and must: exit with the code the case names, print no
traceback, name what was wrong, and write nothing (a new project directory is not
created, a run directory stays byte-identical).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from scheduler.audit import AuditLog
from scheduler.events import RunFailed
from tests.conftest import DATA

CORPUS = DATA / "bad_inputs"
CASES: list[dict[str, Any]] = yaml.safe_load((CORPUS / "cases.yaml").read_text())


def _empty_log(run: Path) -> None:
    (run / ".pact" / "audit.jsonl").write_bytes(b"")


def _cut_log(run: Path) -> None:
    log = run / ".pact" / "audit.jsonl"
    log.write_bytes(b"".join(log.read_bytes().splitlines(keepends=True)[:20]))


def _cut_first_line(run: Path) -> None:
    # The run_started line cut short in the middle: every other event follows it.
    log = run / ".pact" / "audit.jsonl"
    first, rest = log.read_bytes().split(b"\n", 1)
    log.write_bytes(first[:50] + b"\n" + rest)


def _pact_own_log(run: Path) -> None:
    # The shape of another tool's log (Pact keeps its own .pact/ too).
    (run / ".pact" / "audit.jsonl").write_text(
        '{"timestamp": "2026-02-14T16:30:25", "action": "phase_start", "phase": "interview"}\n'
        '{"timestamp": "2026-02-14T16:42:10", "action": "phase_end", "phase": "interview"}\n'
    )


def _log_is_a_directory(run: Path) -> None:
    log = run / ".pact" / "audit.jsonl"
    log.unlink()
    log.mkdir()


def _state_is_a_directory(run: Path) -> None:
    state = run / ".pact" / "state.json"
    state.unlink()
    state.mkdir()


def _failed_state_is_a_directory(run: Path) -> None:
    _fail_run(run)
    _state_is_a_directory(run)


def _no_pact(run: Path) -> None:
    shutil.rmtree(run / ".pact")


def _fail_run(run: Path) -> None:
    with AuditLog(run / ".pact" / "audit.jsonl") as audit:
        audit.append(RunFailed(reason="stopped by hand for a test"))


MUTATIONS = {
    "empty_log": _empty_log,
    "cut_log": _cut_log,
    "cut_first_line": _cut_first_line,
    "pact_own_log": _pact_own_log,
    "log_is_a_directory": _log_is_a_directory,
    "no_pact": _no_pact,
    "fail_run": _fail_run,
    "state_is_a_directory": _state_is_a_directory,
    "failed_state_is_a_directory": _failed_state_is_a_directory,
}


def pact(
    args: list[str], *, unset: list[str], given: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in set(unset)}
    env.update({"COLUMNS": "200", "NO_COLOR": "1", **(given or {})})
    return subprocess.run(
        [sys.executable, "-m", "scheduler.cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        stdin=subprocess.DEVNULL,
    )


def snapshot(root: Path) -> dict[str, bytes | None]:
    """Every file and directory under ``root`` with its bytes (None: a directory)."""
    out: dict[str, bytes | None] = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        out[rel] = None if path.is_dir() else path.read_bytes()
    return out


def dead_broker() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"redis://127.0.0.1:{port}/0"


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """One finished demo run; each case works on a copy."""
    run = tmp_path_factory.mktemp("finished") / "run"
    res = pact(["demo", str(run)], unset=[])
    assert res.returncode == 0, res.stdout + res.stderr
    yield run


def test_the_corpus_is_large_and_every_file_is_used() -> None:
    assert len(CASES) >= 60
    assert len({c["id"] for c in CASES}) == len(CASES), "case ids must be unique"
    text = (CORPUS / "cases.yaml").read_text()
    for path in [*(CORPUS / "trees").iterdir(), *(CORPUS / "settings").iterdir()]:
        assert path.name in text, f"{path.name} is in the corpus but no case uses it"
    for path in (DATA / "bad_trees").iterdir():
        assert path.name in text, f"bad_trees/{path.name} is not in the corpus"


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_bad_input_is_refused_clearly_and_nothing_is_written_or_lost(
    case: dict[str, Any], tmp_path: Path, example: Path, finished_run: Path
) -> None:
    new = tmp_path / "new"
    run = tmp_path / "run"
    afile = tmp_path / "afile"
    afile.write_text("a file, not a directory\n")
    markup = tmp_path / "x[/b]y[red]z"
    settings = case.get("settings")
    if settings == "DIRECTORY":
        (new / "pact.yaml").mkdir(parents=True)
    elif settings:
        new.mkdir()
        shutil.copyfile(CORPUS / "settings" / settings, new / "pact.yaml")
    if "{run}" in " ".join(case["argv"]):
        shutil.copytree(finished_run, run)
        if case.get("mutate"):
            MUTATIONS[case["mutate"]](run)
    places = {
        "{corpus}": str(CORPUS),
        "{trees}": str(DATA / "bad_trees"),
        "{tree}": str(example / "tree.json"),
        "{replay}": str(example / "replay"),
        "{new}": str(new),
        "{run}": str(run),
        "{file}": str(afile),
        "{markup}": str(markup),
        "{dead}": dead_broker(),
    }

    def placed(text: str) -> str:
        for key, value in places.items():
            text = text.replace(key, value)
        return text

    args = [placed(arg) for arg in case["argv"]]
    given = {name: placed(value) for name, value in case.get("env", {}).items()}
    before_new = snapshot(new) if new.exists() else None
    before_run = snapshot(run) if run.exists() else None

    res = pact(args, unset=case.get("unset", []), given=given)

    output = res.stdout + res.stderr
    assert res.returncode == case["exit"], output
    assert "Traceback" not in output and "internal error" not in output, output
    message = " ".join(res.stderr.split())
    for words in case["says"]:
        assert words in message, f"{words!r} not in: {message}"
    if before_new is None:
        assert not new.exists(), f"{new} was created"
    else:
        assert snapshot(new) == before_new, "the project directory changed"
    if before_run is not None:
        assert snapshot(run) == before_run, "the run directory changed"
    assert not markup.exists()
    assert afile.read_text() == "a file, not a directory\n"


def test_status_reads_a_run_whose_snapshot_is_a_directory_from_its_log(
    tmp_path: Path, finished_run: Path
) -> None:
    """The snapshot is a cache of the log: one that cannot be read is reported, and the
    status comes from the log; nothing is written."""
    run = tmp_path / "run"
    shutil.copytree(finished_run, run)
    _state_is_a_directory(run)
    before = snapshot(run)
    for args in (["status", str(run)], ["status", str(run), "--json"]):
        res = pact(args, unset=[])
        assert res.returncode == 0, res.stdout + res.stderr
        assert "Traceback" not in res.stderr and "internal error" not in res.stderr
    assert '"status": "completed"' in res.stdout
    res = pact(["rebuild", str(run), "--dry-run"], unset=[])
    assert res.returncode == 1, res.stdout + res.stderr
    assert "state.json: unreadable (Is a directory)" in res.stdout + res.stderr
    assert snapshot(run) == before


def test_a_demo_with_a_bad_worker_count_makes_no_temporary_directory(tmp_path: Path) -> None:
    temp = tmp_path / "temp"
    temp.mkdir()
    for count in ("0", "2000"):
        res = pact(["demo", "--workers", count], unset=[], given={"TMPDIR": str(temp)})
        assert res.returncode == 2, res.stdout + res.stderr
        assert "--workers must be at" in res.stderr
        assert list(temp.iterdir()) == []


def test_an_empty_replay_directory_is_refused_before_the_run_is_written(
    tmp_path: Path, example: Path
) -> None:
    replay = tmp_path / "replay"
    replay.mkdir()
    project = tmp_path / "p"
    res = pact(
        ["run", str(example / "tree.json"), "--project", str(project), "--replay-dir", str(replay)],
        unset=[],
    )
    assert res.returncode == 2, res.stdout + res.stderr
    assert "--replay-dir" in res.stderr and "is empty" in res.stderr
    assert not project.exists()
