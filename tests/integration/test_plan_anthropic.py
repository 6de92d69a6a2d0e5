"""``pact plan --agent anthropic``: the planning roles through the Anthropic backend (the
local stand-in of the API), the invalid tree sent back with its error."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import yaml

from tests.integration.fleet import pact_argv
from tests.standins.anthropic_server import AnthropicStandIn, ToolAnswer

KEY = "sk-ant-plan-test"
MODEL = "claude-sonnet-4-6"


def test_pact_plan_asks_the_interviewer_and_the_decomposer_through_the_anthropic_backend(
    example: Path, tmp_path: Path
) -> None:
    interview = json.loads((example / "replay" / "plan" / "interview.json").read_text())
    tree = json.loads((example / "replay" / "plan" / "tree.json").read_text())
    broken = {**tree, "root_id": "nowhere"}
    project = tmp_path / "project"
    project.mkdir()
    with AnthropicStandIn(api_key=KEY) as api:
        api.script(ToolAnswer(interview), ToolAnswer(broken), ToolAnswer(tree))
        settings = {
            "agents": {"default": {"backend": "anthropic", "model": MODEL, "base_url": api.url}}
        }
        (project / "pact.yaml").write_text(yaml.safe_dump(settings), encoding="utf-8")
        res = subprocess.run(
            pact_argv(
                "plan",
                str(example / "task.md"),
                "--project",
                str(project),
                "--agent",
                "anthropic",
                "--approve",
            ),
            capture_output=True,
            text=True,
            timeout=300,
            env={**os.environ, "ANTHROPIC_API_KEY": KEY, "COLUMNS": "400"},
        )
        requests = api.requests
    assert res.returncode == 0, res.stdout + res.stderr
    assert len(requests) == 3
    systems = ["".join(b["text"] for b in r.body["system"]) for r in requests]
    assert systems[0].startswith("You are the interviewer")
    assert all(s.startswith("You are the decomposer") for s in systems[1:])
    users = [r.body["messages"][0]["content"][0]["text"] for r in requests]
    assert "# Task" in users[0] and "expression calculator" in users[0]
    assert "Your previous tree was rejected" not in users[1]
    assert "Your previous tree was rejected" in users[2] and "nowhere" in users[2]
    written = json.loads((project / "decomposition" / "tree.json").read_text())
    assert written["root_id"] == "calculator"
    doc = json.loads((project / "decomposition" / "interview.json").read_text())
    assert len(doc["answer_log"]) == 6
