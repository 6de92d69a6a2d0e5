"""Failure, pause, resume, rebuild and status through the CLI, in subprocesses."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

from tests.acceptance.test_cli import pact

SETTINGS = {"backoff_base_s": 0.05, "backoff_cap_s": 0.2}


def project_with(
    tmp_path: Path, example: Path, steps: dict[str, object], **settings: object
) -> tuple[Path, Path]:
    replay = tmp_path / "replay"
    shutil.copytree(example / "replay", replay)
    doc = yaml.safe_load((replay / "replay.yaml").read_text())
    doc["script"] = steps
    (replay / "replay.yaml").write_text(yaml.safe_dump(doc))
    root = tmp_path / "project"
    root.mkdir()
    (root / "pact.yaml").write_text(yaml.safe_dump({**SETTINGS, **settings}))
    return root, replay


def test_permanent_failure_exits_1_and_shows_the_root_cause(tmp_path: Path, example: Path) -> None:
    steps = {"environment": {"implement": {1: {"permanent": "model refused: content policy"}}}}
    root, replay = project_with(tmp_path, example, steps)
    res = pact(
        "run", str(example / "tree.json"), "--project", str(root), "--replay-dir", str(replay)
    )
    assert res.returncode == 1, res.stdout + res.stderr
    text = " ".join(res.stdout.split())
    assert "environment/implement failed: model refused: content policy" in text
    assert "evaluator: poisoned by environment/implement" in text
    status = json.loads(pact("status", str(root), "--json").stdout)
    assert status["status"] == "failed"
    assert status["poisoned"] == {
        "evaluator/implement": "environment/implement",
        "evaluation/integrate": "environment/implement",
        "calculator/integrate": "environment/implement",
    }
    human = pact("status", str(root))
    assert "root cause: environment/implement: model refused" in " ".join(human.stdout.split())


def test_systemic_pause_then_resume_after_the_fix(tmp_path: Path, example: Path) -> None:
    root, replay = project_with(tmp_path, example, {})
    steps = {}
    for cid in ("tokens", "ast_nodes", "environment"):
        broken = replay / "broken" / cid / "src"
        broken.mkdir(parents=True)
        text = (replay / cid / "src" / f"{cid}.py").read_text()
        future = "from __future__ import annotations\n"
        (broken / f"{cid}.py").write_text(text.replace(future, future + "import yaml_plus\n", 1))
        steps[cid] = {"implement": {n: {"files": f"broken/{cid}"} for n in (1, 2, 3)}}
    doc = yaml.safe_load((replay / "replay.yaml").read_text())
    doc["script"] = steps
    (replay / "replay.yaml").write_text(yaml.safe_dump(doc))
    res = pact(
        "run", str(example / "tree.json"), "--project", str(root), "--replay-dir", str(replay)
    )
    assert res.returncode == 1
    status = json.loads(pact("status", str(root), "--json").stdout)
    assert status["status"] == "paused" and status["pattern_type"] == "import_error"
    assert "yaml_plus" in status["recommendation"]
    doc["script"] = {}
    (replay / "replay.yaml").write_text(yaml.safe_dump(doc))
    resumed = pact("resume", str(root))
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert json.loads(pact("status", str(root), "--json").stdout)["status"] == "completed"
    again = pact("resume", str(root))
    assert again.returncode == 2 and "already complete" in again.stderr


def test_rebuild_reproduces_state_and_reports_corruption(tmp_path: Path) -> None:
    root = tmp_path / "demo"
    assert pact("demo", str(root)).returncode == 0
    state_path = root / ".pact" / "state.json"
    healthy = state_path.read_bytes()
    res = pact("rebuild", str(root), "--dry-run")
    assert res.returncode == 0 and "matches" in res.stdout
    assert pact("rebuild", str(root)).returncode == 0
    assert json.loads(state_path.read_bytes()) == json.loads(healthy)

    doc = json.loads(healthy)
    doc["state"]["items"]["lexer/implement"]["status"] = "failed"
    doc["state"]["usage"]["cost_usd"] = 123.0
    state_path.write_text(json.dumps(doc))
    (root / ".pact" / "implementations" / "parser" / "src" / "parser.py").unlink()
    res = pact("rebuild", str(root), "--dry-run")
    assert res.returncode == 1
    text = " ".join(res.stdout.split())
    assert "lexer/implement: state says failed" in text
    assert "cost: state says $123.000000" in text
    assert "parser/implement: marked done but its implementation" in text
    assert json.loads(state_path.read_bytes()) == doc  # dry run wrote nothing
    status = pact("status", str(root), "--json")
    assert any("lexer/implement" in p for p in json.loads(status.stdout)["inconsistencies"])
    assert pact("rebuild", str(root)).returncode == 0
    assert json.loads(state_path.read_bytes()) == json.loads(healthy)


def test_status_shows_spend_by_phase_against_caps(tmp_path: Path, example: Path) -> None:
    root, replay = project_with(
        tmp_path, example, {}, budget_usd=20.0, phase_caps={"implement": 0.25}
    )
    assert (
        pact(
            "run", str(example / "tree.json"), "--project", str(root), "--replay-dir", str(replay)
        ).returncode
        == 0
    )
    text = pact("status", str(root)).stdout
    line = next(row for row in text.splitlines() if "implement" in row and "$5.00" in row)
    assert "$0.1998" in line  # 6 code author calls at $0.0333, of a $5.00 cap
    assert "total budget: $" in text and "of $20.00" in text


def test_doctor_shows_environment(tmp_path: Path) -> None:
    res = pact("doctor", str(tmp_path))
    assert res.returncode == 0, res.stdout
    assert "python interpreter 'python3'" in res.stdout and "required tool 'pytest'" in res.stdout
    (tmp_path / "pact.yaml").write_text(
        "environment:\n  required_tools: [pytest, no-such-tool-x]\n"
    )
    res = pact("doctor", str(tmp_path))
    assert res.returncode == 1
    assert "MISSING required tool 'no-such-tool-x'" in " ".join(res.stdout.split())
    # With no directory given, the working directory's pact.yaml is checked.
    res = pact("doctor", cwd=tmp_path)
    assert res.returncode == 1, res.stdout + res.stderr
    assert "MISSING required tool 'no-such-tool-x'" in " ".join(res.stdout.split())


def test_doctor_checks_docker_and_redis_and_says_how_to_fix(tmp_path: Path) -> None:
    res = pact("doctor", str(tmp_path), "--broker", "redis://127.0.0.1:1/0")
    assert res.returncode == 1
    text = " ".join(res.stdout.split())
    assert "MISSING Redis at redis://127.0.0.1:1/0" in text and "start redis-server" in text
    assert "Docker engine" in text  # reported, but not required for the local sandbox
    env = {**os.environ, "PACT_SANDBOX_BASE_IMAGE": "pact-no-such-base:0"}
    res = subprocess.run(
        [sys.executable, "-m", "scheduler.cli", "doctor", str(tmp_path), "--sandbox", "docker"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**env, "COLUMNS": "200"},
    )
    text = " ".join(res.stdout.split())
    assert res.returncode == 1
    assert ("sandbox base image 'pact-no-such-base:0'" in text and "build-base.sh" in text) or (
        "MISSING Docker engine" in text
    )
