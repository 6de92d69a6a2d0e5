"""``pact verify``: a Pact project's recorded test counts reproduced by our harness."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.pactlayout import FAILING, FAILING_COUNTS, files_of, pact_project_from_example


def pact(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "400", "NO_COLOR": "1"}
    return subprocess.run(
        [sys.executable, "-m", "scheduler.cli", *args],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )


def test_pact_verify_reproduces_every_recorded_count_and_writes_nothing(
    example: Path, tmp_path: Path
) -> None:
    root = pact_project_from_example(example, tmp_path / "pact-project")
    before = files_of(root)
    res = pact("verify", str(root), "--json")
    assert res.returncode == 0, res.stdout + res.stderr
    rows = {row["component"]: row for row in json.loads(res.stdout)}
    assert len(rows) == 10
    assert all(row["match"] for row in rows.values())
    assert rows[FAILING]["reproduced"] == FAILING_COUNTS
    assert rows["parser"]["reproduced"] == {"total": 13, "passed": 13, "failed": 0, "errors": 0}
    assert files_of(root) == before  # nothing written into the Pact project
    # The .pact/ directory itself is accepted too; the text output names each component.
    res = pact("verify", str(root / ".pact"))
    assert res.returncode == 0, res.stdout + res.stderr
    assert "evaluator: recorded 11/13 passed, 2 failed, 0 errors" in res.stdout


def test_pact_verify_exits_1_when_a_recorded_count_is_edited(example: Path, tmp_path: Path) -> None:
    root = pact_project_from_example(example, tmp_path / "pact-project", only=("tokens", "lexer"))
    results = root / ".pact" / "implementations" / "lexer" / "test_results.json"
    doc = json.loads(results.read_text())
    results.write_text(json.dumps({**doc, "passed": doc["passed"] - 1, "failed": 1}))
    res = pact("verify", str(root), "--json")
    assert res.returncode == 1, res.stdout + res.stderr
    rows = {row["component"]: row for row in json.loads(res.stdout)}
    assert not rows["lexer"]["match"]
    assert rows["lexer"]["reproduced"]["failed"] == 0
    assert [c for c, row in rows.items() if not row["match"]] == ["lexer"]
    assert sorted(rows) == ["lexer", "tokens"]


def test_pact_verify_refuses_bad_input_naming_the_file(example: Path, tmp_path: Path) -> None:
    res = pact("verify", str(tmp_path / "nowhere"))
    assert res.returncode == 2 and "nowhere" in res.stderr
    root = pact_project_from_example(example, tmp_path / "pact-project", only=("tokens",))
    broken = root / ".pact" / "implementations" / "tokens" / "test_results.json"
    broken.write_text('{"total": "many"}')
    res = pact("verify", str(root))
    assert res.returncode == 2, res.stdout + res.stderr
    assert "tokens/test_results.json" in res.stderr and "Traceback" not in res.stderr
    broken.write_text('{"total": 1, "passed": 3, "failed": 0, "errors": 0}')
    res = pact("verify", str(root))
    assert res.returncode == 2 and "exceed total" in res.stderr
