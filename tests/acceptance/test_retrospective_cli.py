"""Retrospectives through the CLI: every run that ends writes one, a failed run too, and
later runs configured by the same pact.yaml (and the same project, resumed) show its
lessons to their code authors (asserted on the prompts the provider's stand-in got)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from tests.acceptance.test_provenance_cli import pact
from tests.integration.test_anthropic_run import PRICES, Oracle
from tests.standins.anthropic_server import AnthropicStandIn, ErrorReply, ToolAnswer

MODEL = "claude-standin"
KEY = "sk-ant-standin-retro-0123"


class BrokenEvaluator(Oracle):
    """The example's oracle, except that while ``broken`` the code author of
    ``evaluator`` answers with code that fails the contract's tests."""

    broken = True

    def __call__(self, body: dict[str, Any]) -> ToolAnswer | ErrorReply:
        system = "".join(block["text"] for block in body["system"])
        user = body["messages"][0]["content"][0]["text"]
        if (
            self.broken
            and system.startswith("You are the code author")
            and user.startswith("# Component evaluator\n")
        ):
            return ToolAnswer(
                {"files": {"evaluator.py": "def evaluate(*args, **kw):\n    return 0\n"}}
            )
        return super().__call__(body)


def prompts_of(api: AnthropicStandIn, component: str) -> list[str]:
    """The user prompts the code author of ``component`` was sent."""
    found = []
    for request in api.requests:
        system = "".join(block["text"] for block in request.body["system"])
        user = request.body["messages"][0]["content"][0]["text"]
        if system.startswith("You are the code author") and user.startswith(
            f"# Component {component}\n"
        ):
            found.append(user)
    return found


def test_a_failed_run_writes_its_retrospective_and_later_runs_show_its_lessons(
    example: Path, tmp_path: Path
) -> None:
    settings: dict[str, Any] = {
        "agents": {"default": {"backend": "anthropic", "model": MODEL}},
        "prices": {MODEL: PRICES},
        "max_attempts": 1,
        # Every code author is asked (served from the cache, it would send no prompt).
        "cache": "off",
    }
    first, second = tmp_path / "first", tmp_path / "second"
    oracle = BrokenEvaluator(example / "replay")
    env = {"ANTHROPIC_API_KEY": KEY}
    with AnthropicStandIn(api_key=KEY, oracle=oracle) as api:
        settings["agents"]["default"]["base_url"] = api.url
        for project in (first, second):
            project.mkdir()
            (project / "pact.yaml").write_text(yaml.safe_dump(settings), encoding="utf-8")
        tree = str(example / "tree.json")
        failed = pact("run", tree, "--project", str(first), "--agent", "anthropic", env=env)
        assert failed.returncode == 1, failed.stderr
        # The failed run's retrospective, written at its end.
        retro = json.loads(pact("retrospective", str(first), "--json").stdout)
        assert retro["status"] == "failed" and retro["saved"] is True
        assert (first / ".pact" / "retrospectives" / f"{retro['run_id']}.json").is_file()
        lesson = next(x for x in retro["lessons"] if x.startswith("evaluator/implement: "))
        assert "it never passed" in lesson
        assert any(p.startswith("run failed: ") for p in retro["failure_patterns"])
        # Its first code author prompt carried no lesson: there was no earlier run.
        assert all("Lessons from earlier runs" not in p for p in prompts_of(api, "evaluator"))
        seen = len(api.requests)

        # Another project with the same pact.yaml: its code authors see the lesson.
        oracle.broken = False
        done = pact("run", tree, "--project", str(second), "--agent", "anthropic", env=env)
        assert done.returncode == 0, done.stderr
        later = prompts_of(api, "evaluator")
        assert len(later) == 2
        assert "## Lessons from earlier runs\n- " + lesson in later[-1]
        assert lesson in prompts_of(api, "parser")[-1]  # every code author, ranked lower
        assert (second / ".pact" / "retrospectives").is_dir()

        # The same project, resumed: the evaluator's new code author sees it too.
        before = len(api.requests)
        assert before > seen
        resumed = pact("resume", str(first), env=env)
        assert resumed.returncode == 0, resumed.stderr
        assert lesson in prompts_of(api, "evaluator")[-1]
        status = json.loads(pact("status", str(first), "--json").stdout)
        assert status["status"] == "completed"
        assert status["provenance"]["retrospective"].endswith(f"{retro['run_id']}.json")
    # Resumed to completion, the run's retrospective now says so.
    assert json.loads(pact("retrospective", str(first), "--json").stdout)["status"] == "completed"


def test_retrospective_of_a_directory_without_a_run_is_refused(tmp_path: Path) -> None:
    shown = pact("retrospective", str(tmp_path))
    assert shown.returncode == 2
    assert "no pact run here" in shown.stderr
    assert "Traceback" not in shown.stderr
