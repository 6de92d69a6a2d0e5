"""Regressions caught at promotion, through the CLI with the replay agent: a done
component implemented again (``pact resume --redo``) is promoted only when the tests of
what already uses it still pass; the log says what broke and whose it was."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import yaml

from tests.acceptance.test_cli import pact
from tests.runs import RunBuilder, star_tree

#: tokens' second implementation: its own tests pass (none builds an EOF token), but the
#: lexer ends every token list with an EOF token of empty text, which it now refuses.
BREAKS_LEXER = (
    "        if self.position < 0:\n",
    "        if self.kind is TokenKind.EOF and not self.text:\n"
    '            raise ValueError("an EOF token needs text")\n'
    "        if self.position < 0:\n",
)
#: A second implementation that makes '#' a symbol: tokens' tests pass, the lexer's code
#: runs without error, but a lexer test expecting a LexError for '#' fails in the test
#: itself: nothing in the traceback points into tokens.
SHIFTS_LEXER = (
    "    return SYMBOLS.get(char)\n",
    '    return TokenKind.COMMA if char == "#" else SYMBOLS.get(char)\n',
)


def second_implementation(replay: Path, change: tuple[str, str]) -> str:
    """Script tokens' implement attempt 2 to serve ``change``; returns the changed source."""
    original = (replay / "tokens" / "src" / "tokens.py").read_text(encoding="utf-8")
    assert original.count(change[0]) == 1
    changed = original.replace(*change)
    attempt = replay / "tokens" / "attempts" / "implement-2" / "src"
    attempt.mkdir(parents=True)
    (attempt / "tokens.py").write_text(changed, encoding="utf-8")
    script_path = replay / "replay.yaml"
    script = yaml.safe_load(script_path.read_text(encoding="utf-8"))
    script["script"].setdefault("tokens", {})["implement"] = {
        2: {"files": "tokens/attempts/implement-2"}
    }
    script_path.write_text(yaml.safe_dump(script), encoding="utf-8")
    return changed


def events(project: Path) -> list[dict[str, object]]:
    lines = (project / ".pact" / "audit.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def run_then_redo_tokens(
    example: Path, replay: Path, tmp_path: Path, *, settings: str = ""
) -> Path:
    project = tmp_path / "project"
    if settings:
        project.mkdir()
        (project / "pact.yaml").write_text(settings, encoding="utf-8")
    tree = tmp_path / "tree.json"
    shutil.copyfile(example / "tree.json", tree)
    res = pact("run", str(tree), "--project", str(project), "--replay-dir", str(replay))
    assert res.returncode == 0, res.stderr
    res = pact("resume", str(project), "--redo", "tokens")
    assert res.returncode == 0, res.stderr + res.stdout
    return project


def test_a_second_implementation_that_breaks_a_done_dependent_is_violated_and_rolled_back(
    example: Path, replay_copy: Path, tmp_path: Path
) -> None:
    broken = second_implementation(replay_copy, BREAKS_LEXER)
    project = run_then_redo_tokens(example, replay_copy, tmp_path, settings="promote: git\n")
    log = events(project)
    checks = [e for e in log if e["type"] == "regression_checked"]
    assert [(c["attempt"], c["status"]) for c in checks] == [(2, "violated"), (3, "accepted")]
    violated = checks[0]
    assert {"lexer", "parser", "lexing", "parsing", "calculator"} <= set(violated["dependents"])
    intent = violated["intent_regressions"]
    assert intent and all("src/tokens.py" in f["paths"] for f in intent)
    assert any(f["test_id"].startswith("lexer: ") for f in intent)
    tokens = [e for e in log if e.get("component_id") == "tokens" and e.get("phase") == "implement"]
    kinds = [(e["type"], e.get("attempt")) for e in tokens]
    # Attempt 2 failed and was never promoted; attempt 3 carried the regressions.
    assert ("item_failed", 2) in kinds and ("item_succeeded", 2) not in kinds
    promoted_after = [e for e in tokens if e["type"] == "artifacts_promoted"]
    last_promotion = max(i for i, k in enumerate(kinds) if k[0] == "artifacts_promoted")
    assert kinds.index(("item_succeeded", 3)) < last_promotion
    assert len(promoted_after) == 2  # the first run's and attempt 3's
    third = next(e for e in tokens if e["type"] == "item_dispatched" and e["attempt"] == 3)
    feedback = third["feedback"]
    assert feedback and "violated" in feedback[-1]["summary"]
    assert {t for t, _ in feedback[-1]["failing_tests"]} == {f["test_id"] for f in intent}
    promoted = project / ".pact" / "implementations" / "tokens" / "src" / "tokens.py"
    assert promoted.read_text(encoding="utf-8") != broken
    assert "an EOF token needs text" not in promoted.read_text(encoding="utf-8")
    status = json.loads(pact("status", str(project), "--json").stdout)
    assert status["status"] == "completed"
    # promote: git: the violated attempt never reached a commit; 1 and 3 did.
    log_of = subprocess.run(
        [
            "git",
            "-C",
            str(project),
            "log",
            "--format=%s",
            "-p",
            "--",
            ".pact/implementations/tokens",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "an EOF token needs text" not in log_of
    subjects = [line for line in log_of.splitlines() if line.startswith("pact: tokens")]
    assert subjects == ["pact: tokens implement (attempt 3)", "pact: tokens implement (attempt 1)"]


def test_regressions_outside_the_change_s_files_are_accepted_and_listed(
    example: Path, replay_copy: Path, tmp_path: Path
) -> None:
    changed = second_implementation(replay_copy, SHIFTS_LEXER)
    project = run_then_redo_tokens(example, replay_copy, tmp_path)
    checks = [e for e in events(project) if e["type"] == "regression_checked"]
    assert [(c["attempt"], c["status"]) for c in checks] == [(2, "accepted_with_external_changes")]
    external = checks[0]["external_regressions"]
    assert external and not checks[0]["intent_regressions"]
    assert all("src/tokens.py" not in f["paths"] for f in external)
    assert any(f["test_id"].startswith("lexer: ") for f in external)
    promoted = project / ".pact" / "implementations" / "tokens" / "src" / "tokens.py"
    assert promoted.read_text(encoding="utf-8") == changed
    shown = pact("status", str(project))
    assert "accepted_with_external_changes" in shown.stdout
    assert external[0]["test_id"] in shown.stdout


def test_redo_names_an_unknown_or_unfinished_component_and_writes_nothing(
    tmp_path: Path,
) -> None:
    builder = RunBuilder(tmp_path / "project", star_tree(2))
    builder.complete("c1")
    builder.fail_run("stopped for the test")
    project = builder.close().root
    before = (project / ".pact" / "audit.jsonl").read_bytes()
    for name, words in (("ghost", ["ghost", "no such component"]), ("c2", ["c2", "not done"])):
        res = pact("resume", str(project), "--redo", name, "--agent", "noop")
        assert res.returncode == 2, res.stdout
        assert all(w in res.stderr for w in words), res.stderr
    assert (project / ".pact" / "audit.jsonl").read_bytes() == before
