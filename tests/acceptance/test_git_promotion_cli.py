"""``promote: git`` through the CLI: the demo's project directory gets one commit per
promoted artifact, each naming what it holds, by the configured author."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from tests.acceptance.test_cli import pact


def git(project: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(project), *args], capture_output=True, text=True, check=True
    ).stdout


def test_the_demo_with_promote_git_makes_one_commit_per_promoted_artifact(tmp_path: Path) -> None:
    project = tmp_path / "demo"
    project.mkdir()
    (project / "pact.yaml").write_text(
        "promote: git\npromote_author: Fleet Bot <fleet@example.test>\n", encoding="utf-8"
    )
    res = pact("demo", str(project))
    assert res.returncode == 0, res.stderr
    status = json.loads(pact("status", str(project), "--json").stdout)
    promoted = [
        f"pact: {c['component_id']} {phase} (attempt {c['attempts'][phase]})"
        for c in status["components"]
        for phase, state in c["phases"].items()
        if state == "done"
    ]
    assert len(promoted) == 30  # ten components, three phases each, all verified

    subjects = git(project, "log", "--format=%s").splitlines()
    assert sorted(subjects) == sorted(promoted)  # one commit per promoted artifact
    assert set(git(project, "log", "--format=%an <%ae>").splitlines()) == {
        "Fleet Bot <fleet@example.test>"
    }
    # The evaluator's first implementation failed its tests: only the second was
    # committed, with its run, test counts and cost.
    body = git(project, "log", "--format=%B", "--grep", "evaluator implement")
    assert "Attempt: 2" in body and "Attempt: 1\n" not in body
    assert f"Run: {status['run_id']}" in body
    assert "Tests: 13/13 passed" in body and "Cost: $" in body
    # Each commit holds its own artifact only, and everything promoted is committed.
    files = git(project, "show", "--name-only", "--format=", "HEAD").splitlines()
    assert files and all(f.startswith(".pact/") for f in files)
    assert (
        git(project, "status", "--porcelain", "--", ".pact/contracts", ".pact/implementations")
        == ""
    )


def test_a_bad_promote_author_is_refused_before_anything_runs(tmp_path: Path) -> None:
    project = tmp_path / "demo"
    project.mkdir()
    (project / "pact.yaml").write_text("promote: git\npromote_author: nobody\n", encoding="utf-8")
    res = pact("demo", str(project))
    assert res.returncode == 2
    assert "promote_author" in res.stderr and "Name <email>" in res.stderr
    assert not (project / ".pact").exists()
