"""What a new user meets in the first hour, one test per class of defect, through the CLI.

Large and deep trees, Ctrl-C, budgets smaller than one call, markup in what the run
reports, the noop agent, pact.yaml's agents as the default, and doctor's labels.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from bench.trees import chain_tree, synthetic_tree
from tests.acceptance.test_cli import pact
from tests.acceptance.test_resilience_cli import project_with


def start(*args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "COLUMNS": "200", "NO_COLOR": "1"}
    return subprocess.Popen(
        [sys.executable, "-m", "scheduler.cli", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def wait_for_lines(path: Path, lines: int, timeout_s: float = 120.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if path.exists() and path.read_bytes().count(b"\n") >= lines:
            return
        time.sleep(0.1)
    raise AssertionError(f"{path} did not reach {lines} lines")


def interrupt(proc: subprocess.Popen[str]) -> tuple[int, str]:
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=60)
    return proc.returncode, " ".join(stderr.split())


def test_a_ten_thousand_component_tree_validates_and_its_run_answers_status(
    tmp_path: Path,
) -> None:
    tree = tmp_path / "big.json"
    tree.write_text(json.dumps(synthetic_tree(10_000, 10)))
    project = tmp_path / "big"
    dry = pact("run", str(tree), "--project", str(project), "--agent", "noop", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert "10000 components" in dry.stdout and "30000 work items" in dry.stdout
    assert not project.exists()
    proc = start("run", str(tree), "--project", str(project), "--agent", "noop")
    wait_for_lines(project / ".pact" / "audit.jsonl", 20)
    code, stderr = interrupt(proc)
    assert code == 130 and f"pact resume {project}" in stderr, stderr
    status = pact("status", str(project), "--json")
    assert status.returncode == 0, status.stderr
    doc = json.loads(status.stdout)
    assert sum(doc["items"].values()) == 30_000 and len(doc["components"]) == 10_000
    assert doc["status"] == "active" and doc["driven"] is False
    human = pact("status", str(project))
    assert human.returncode == 0 and "interrupted" in human.stdout
    assert "more components not shown" in human.stdout


def test_a_five_thousand_deep_chain_loads_runs_and_answers_status(tmp_path: Path) -> None:
    tree = tmp_path / "deep.json"
    tree.write_text(json.dumps(chain_tree(5_000)))
    project = tmp_path / "deep"
    dry = pact("run", str(tree), "--project", str(project), "--agent", "noop", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert "depth 4999" in dry.stdout
    proc = start("run", str(tree), "--project", str(project), "--agent", "noop")
    wait_for_lines(project / ".pact" / "audit.jsonl", 10)
    code, stderr = interrupt(proc)
    assert code == 130, stderr
    assert "RecursionError" not in stderr
    status = pact("status", str(project), "--json")
    assert status.returncode == 0, status.stderr
    assert sum(json.loads(status.stdout)["items"].values()) == 15_000


def test_ctrl_c_saves_the_run_says_how_to_continue_and_resume_completes_it(
    tmp_path: Path, example: Path
) -> None:
    root, replay = project_with(tmp_path, example, {})
    doc = yaml.safe_load((replay / "replay.yaml").read_text())
    doc["latency_s"] = {"test_author": 0.5, "code_author": 0.5}
    (replay / "replay.yaml").write_text(yaml.safe_dump(doc))
    proc = start(
        "run", str(example / "tree.json"), "--project", str(root), "--replay-dir", str(replay)
    )
    log = root / ".pact" / "audit.jsonl"
    wait_for_lines(log, 15)
    code, stderr = interrupt(proc)
    assert code == 130, stderr
    assert f"continue it with `pact resume {root}`" in stderr
    assert "Traceback" not in stderr and "KeyboardInterrupt" not in stderr
    rebuilt = pact("rebuild", str(root), "--dry-run")
    assert rebuilt.returncode == 0, rebuilt.stdout  # state.json was written on the way out
    resumed = pact("resume", str(root))
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert json.loads(pact("status", str(root), "--json").stdout)["status"] == "completed"


def test_a_budget_smaller_than_one_attempt_stops_before_the_first_dispatch(
    tmp_path: Path, example: Path
) -> None:
    # The replay script bills $0.0618 per contract: a $0.0001 budget cannot pay for one.
    root, replay = project_with(tmp_path, example, {}, budget_usd=0.0001)
    res = pact(
        "run", str(example / "tree.json"), "--project", str(root), "--replay-dir", str(replay)
    )
    assert res.returncode == 1
    text = " ".join(res.stdout.split())
    assert "$0.00010" in text and "budget" in text
    status = json.loads(pact("status", str(root), "--json").stdout)
    assert status["usage"]["cost_usd"] == 0.0
    assert status["items"].get("dispatched", 0) == 0 and "done" not in status["items"]
    human = " ".join(pact("status", str(root)).stdout.split())
    assert "total budget: $0.00 of $0.00010" in human


def test_markup_in_an_agent_error_is_shown_literally(tmp_path: Path, example: Path) -> None:
    steps = {"environment": {"implement": {1: {"permanent": "bad [/b] output [red]here"}}}}
    root, replay = project_with(tmp_path, example, steps)
    res = pact(
        "run", str(example / "tree.json"), "--project", str(root), "--replay-dir", str(replay)
    )
    assert res.returncode == 1, res.stderr
    assert "bad [/b] output [red]here" in res.stdout
    status = pact("status", str(root))
    assert status.returncode == 0 and "bad [/b] output [red]here" in status.stdout


def test_noop_says_it_verified_nothing_real(tmp_path: Path, example: Path) -> None:
    root = tmp_path / "noop"
    res = pact("run", str(example / "tree.json"), "--project", str(root), "--agent", "noop")
    assert res.returncode == 0, res.stdout + res.stderr
    note = "the noop agent writes placeholder code"
    assert note in " ".join(res.stdout.split()) and note in res.stderr
    assert note in " ".join(pact("status", str(root)).stdout.split())
    warnings = json.loads(pact("status", str(root), "--json").stdout)["warnings"]
    assert any(note in w for w in warnings)


def test_pact_yaml_agents_are_the_default_agent(tmp_path: Path, example: Path) -> None:
    root = tmp_path / "configured"
    root.mkdir()
    (root / "pact.yaml").write_text("agents:\n  default:\n    backend: noop\n")
    res = pact("run", str(example / "tree.json"), "--project", str(root))
    assert res.returncode == 0, res.stdout + res.stderr
    first = json.loads((root / ".pact" / "audit.jsonl").read_text().splitlines()[0])
    assert first["agent"] == "noop"


def test_doctor_labels_what_it_skips_and_checks_api_keys(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    res = pact("doctor", str(tmp_path), unset=["ANTHROPIC_API_KEY"])
    assert res.returncode == 0, res.stdout
    engine = next(line for line in res.stdout.splitlines() if "Docker engine" in line)
    assert engine.split()[0] == "skip", engine
    assert "warn local sandbox" in " ".join(res.stdout.split())
    (tmp_path / "pact.yaml").write_text("agents:\n  default:\n    backend: anthropic\n")
    res = pact("doctor", str(tmp_path), unset=["ANTHROPIC_API_KEY"])
    assert res.returncode == 1
    assert "MISSING backend anthropic: anthropic key ANTHROPIC_API_KEY is not set" in " ".join(
        res.stdout.split()
    )


def test_a_yaml_tree_may_use_merge_keys(tmp_path: Path) -> None:
    tree = tmp_path / "merge.yaml"
    tree.write_text(
        "root_id: app\n"
        "nodes:\n"
        '  app: {component_id: app, name: App, parent_id: "", children: [store, api]}\n'
        "  store: &leaf {component_id: store, name: Store, parent_id: app, children: []}\n"
        "  api:\n"
        "    <<: *leaf\n"
        "    component_id: api\n"
        "    name: API\n"
        "    dependencies: [store]\n"
    )
    res = pact("run", str(tree), "--project", str(tmp_path / "p"), "--agent", "noop", "--dry-run")
    assert res.returncode == 0, res.stderr
    assert "3 components" in res.stdout
