"""``scheduler.git_promotion``: one commit per promotion, restricted to its paths."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from pact_workers.models.testing import TestResults
from pact_workers.models.work import Phase, Usage
from scheduler.git_promotion import GitPromotionError, commit_message, commit_promotion

AUTHOR = "Fleet Bot <fleet@example.test>"


def git(root: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(root), *args], capture_output=True, text=True, check=True
    ).stdout


def test_a_promotion_is_one_commit_of_its_paths_and_leaves_what_a_user_staged(
    tmp_path: Path,
) -> None:
    src = tmp_path / ".pact" / "implementations" / "lexer" / "src"
    src.mkdir(parents=True)
    (src / "lexer.py").write_text("A = 1\n")
    (src / "old.py").write_text("B = 1\n")
    first = commit_promotion(
        tmp_path, [".pact/implementations/lexer/src"], message="m1", author=AUTHOR
    )
    assert first is not None
    # A user's own staged file stays staged and out of the fleet's commit.
    (tmp_path / "notes.txt").write_text("mine\n")
    git(tmp_path, "add", "notes.txt")
    (src / "old.py").unlink()
    (src / "lexer.py").write_text("A = 2\n")
    second = commit_promotion(
        tmp_path, [".pact/implementations/lexer/src"], message="m2", author=AUTHOR
    )
    assert second is not None and second != first
    changed = git(tmp_path, "show", "--name-status", "--format=", "HEAD").split("\n")
    assert "D\t.pact/implementations/lexer/src/old.py" in changed
    assert "M\t.pact/implementations/lexer/src/lexer.py" in changed
    assert "notes.txt" in git(tmp_path, "diff", "--cached", "--name-only")
    # Promoting the same files again makes no empty commit.
    assert (
        commit_promotion(tmp_path, [".pact/implementations/lexer/src"], message="m3", author=AUTHOR)
        is None
    )
    assert git(tmp_path, "log", "--format=%s").split() == ["m2", "m1"]
    assert set(git(tmp_path, "log", "--format=%an <%ae>").splitlines()) == {AUTHOR}


def test_an_author_git_cannot_write_is_refused() -> None:
    with pytest.raises(GitPromotionError, match="Name <email>"):
        commit_promotion(Path("."), ["x"], message="m", author="nobody")


def test_the_message_names_component_phase_attempt_run_tests_and_cost() -> None:
    message = commit_message(
        component_id="lexer",
        phase=Phase.IMPLEMENT,
        attempt=2,
        run_id="r1",
        test_results=TestResults(total=5, passed=4, failed=1),
        usage=Usage(input_tokens=10, output_tokens=5, cost_usd=0.25),
    )
    assert message.splitlines()[0] == "pact: lexer implement (attempt 2)"
    for line in ("Run: r1", "Tests: 4/5 passed, 1 failed, 0 errors", "Cost: $0.2500"):
        assert line in message
