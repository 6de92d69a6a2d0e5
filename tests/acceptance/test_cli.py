"""The CLI as a user runs it: real subprocesses, real exit codes, real files."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

import pytest

from tests.conftest import DATA

BAD_TREES = DATA / "bad_trees"

#: Each malformed tree and the words its error message must contain.
EXPECTED = {
    "invalid_json.json": ["invalid JSON", "line 1"],
    "invalid_yaml.yaml": ["invalid YAML", "line 5"],
    "wrong_types.json": ["component 'a'", "children", "valid list"],
    "wrong_type_depth.json": ["component 'app'", "depth", "integer"],
    "duplicate_ids.json": ["duplicate", "'a'"],
    "duplicate_ids.yaml": ["duplicate", "'a'"],
    "unknown_parent.json": ["component 'b'", "unknown parent 'ghost'"],
    "unknown_child.json": ["component 'app'", "unknown child 'ghost'"],
    "unknown_dependency.json": ["component 'a'", "unknown dependency 'ghost'"],
    "parent_children_disagree.json": ["component 'b'", "does not list it in children"],
    "dependency_cycle.json": ["cycle", "a -> b -> a"],
    "child_depends_on_parent.json": ["cycle", "f -> x -> f"],
    "empty_nodes.json": ["no nodes"],
    "empty_file.json": ["empty"],
    "not_utf8.json": ["not UTF-8", "offset 72"],
    "unknown_root.json": ["root_id 'main'"],
    "key_mismatch.json": ["nodes.a", "'z'"],
    "bad_component_id.json": ["a/../../etc", "identifier"],
    "missing_field.json": ["component 'b'", "name", "required"],
    "not_a_mapping.json": ["expected a mapping"],
}


def pact(
    *args: str, cwd: Path | None = None, unset: Iterable[str] = ()
) -> subprocess.CompletedProcess[str]:
    """``pact ARGS...`` in a subprocess; ``unset``: variables it must not inherit."""
    dropped = set(unset)
    env = {k: v for k, v in os.environ.items() if k not in dropped}
    env.update({"COLUMNS": "200", "NO_COLOR": "1"})
    return subprocess.run(
        [sys.executable, "-m", "scheduler.cli", *args],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
        cwd=cwd,
    )


def test_the_corpus_covers_every_file() -> None:
    assert {p.name for p in BAD_TREES.iterdir()} == set(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_malformed_tree_exits_2_with_a_clear_message_and_writes_nothing(
    name: str, tmp_path: Path, example: Path
) -> None:
    project = tmp_path / "project"
    res = pact(
        "run",
        str(BAD_TREES / name),
        "--project",
        str(project),
        "--replay-dir",
        str(example / "replay"),
    )
    assert res.returncode == 2, res.stdout + res.stderr
    message = " ".join(res.stderr.split())
    assert name in message
    for words in EXPECTED[name]:
        assert words in message, message
    assert not project.exists()
    assert list(tmp_path.iterdir()) == []


def test_missing_tree_file_exits_2(tmp_path: Path, example: Path) -> None:
    res = pact(
        "run",
        str(tmp_path / "nope.json"),
        "--project",
        str(tmp_path / "p"),
        "--replay-dir",
        str(example / "replay"),
    )
    assert res.returncode == 2 and "no such file" in res.stderr
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "args, words",
    [
        (["--workers", "0"], "--workers must be at least 1"),
        (["--agent", "oracle"], "unknown agent 'oracle'"),
        (["--sandbox", "vm"], "unknown sandbox 'vm'"),
    ],
)
def test_bad_options_exit_2_and_write_nothing(
    args: list[str], words: str, tmp_path: Path, example: Path
) -> None:
    res = pact(
        "run",
        str(example / "tree.json"),
        "--project",
        str(tmp_path / "p"),
        "--replay-dir",
        str(example / "replay"),
        *args,
    )
    assert res.returncode == 2 and words in " ".join(res.stderr.split())
    assert not (tmp_path / "p").exists()


def test_bad_settings_file_names_the_key(tmp_path: Path, example: Path) -> None:
    project = tmp_path / "p"
    project.mkdir()
    (project / "pact.yaml").write_text("max_retries: 2\nmax_retires: 5\n")
    res = pact(
        "run",
        str(example / "tree.json"),
        "--project",
        str(project),
        "--replay-dir",
        str(example / "replay"),
    )
    assert res.returncode == 2 and "unknown key 'max_retires'" in res.stderr
    assert sorted(p.name for p in project.iterdir()) == ["pact.yaml"]


def test_a_settings_key_written_twice_is_refused_naming_it_and_its_line(
    tmp_path: Path, example: Path
) -> None:
    """YAML's safe loader keeps the last of two equal keys: an edit lower in the file
    would silently undo one above it."""
    project = tmp_path / "p"
    project.mkdir()
    (project / "pact.yaml").write_text("budget_usd: 5\nmax_retries: 2\nbudget_usd: 10\n")
    args = ["--project", str(project), "--replay-dir", str(example / "replay")]
    res = pact("run", str(example / "tree.json"), *args)
    assert res.returncode == 2, res.stderr
    assert "pact.yaml" in res.stderr and "duplicate key 'budget_usd' at line 3" in res.stderr
    assert sorted(p.name for p in project.iterdir()) == ["pact.yaml"]


def test_a_tree_saved_with_a_byte_order_mark_is_read_like_one_without(
    tmp_path: Path, example: Path
) -> None:
    """Some editors start UTF-8 files with a BOM; YAML trees were read so already."""
    tree = tmp_path / "tree.json"
    tree.write_bytes(b"\xef\xbb\xbf" + (example / "tree.json").read_bytes())
    project = tmp_path / "p"
    res = pact("run", str(tree), "--project", str(project), "--agent", "noop", "--dry-run")
    assert res.returncode == 0, res.stderr
    assert not project.exists()


def test_demo_runs_the_example_and_status_reports_it(tmp_path: Path) -> None:
    project = tmp_path / "demo"
    res = pact("demo", str(project))
    assert res.returncode == 0, res.stdout + res.stderr
    assert "completed" in res.stdout and "evaluator" in res.stdout
    status = pact("status", str(project), "--json")
    assert status.returncode == 0, status.stderr
    doc = json.loads(status.stdout)
    assert doc["status"] == "completed"
    assert doc["items"] == {"done": 30}
    assert doc["usage"]["cost_usd"] > 0
    rerun = pact("run", str(project / "tree.json"), "--project", str(project))
    assert rerun.returncode == 2 and "already holds a run" in rerun.stderr


def test_demo_refuses_a_directory_that_is_not_empty(tmp_path: Path) -> None:
    (tmp_path / "keep.txt").write_text("mine")
    res = pact("demo", str(tmp_path))
    assert res.returncode == 2 and "empty directory" in res.stderr
    assert [p.name for p in tmp_path.iterdir()] == ["keep.txt"]


def test_status_of_a_directory_without_a_run_exits_2(tmp_path: Path) -> None:
    res = pact("status", str(tmp_path))
    assert res.returncode == 2 and "no pact run here" in res.stderr


def test_every_command_is_there_and_documents_its_environment_variables() -> None:
    res = pact("--help")
    assert res.returncode == 0
    for command in (
        "run",
        "status",
        "resume",
        "rebuild",
        "demo",
        "doctor",
        "worker",
        "scheduler",
        "submit",
        "runs",
        "workers",
    ):
        assert f" {command} " in res.stdout, command
        help_text = pact(command, "--help").stdout
        if "--" in help_text:
            assert "PACT_" in help_text, command


@pytest.mark.parametrize("value", ["0", "-2", "two", "1.5"])
def test_a_bad_pact_max_pack_exits_2_before_anything_is_written(
    value: str, tmp_path: Path, example: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``PACT_MAX_PACK`` (the most short attempts in one task message) is refused where
    the fleet is chosen: by ``pact run --executor celery`` and by ``pact scheduler``,
    before either reaches the broker (none listens here) or writes anything."""
    monkeypatch.setenv("PACT_MAX_PACK", value)
    nobody = "redis://127.0.0.1:1/0"
    run = pact(
        "run",
        str(example / "tree.json"),
        "--project",
        str(tmp_path / "p"),
        "--replay-dir",
        str(example / "replay"),
        "--executor",
        "celery",
        "--broker",
        nobody,
    )
    service = pact("scheduler", "--broker", nobody, "--runs-dir", str(tmp_path / "runs"))
    for res in (run, service):
        message = " ".join(res.stderr.split())
        assert res.returncode == 2, res.stderr
        assert f"PACT_MAX_PACK='{value}'" in message and "at least 1" in message
        assert "Traceback" not in res.stderr
    assert list(tmp_path.iterdir()) == []
