"""Blocking teachbacks and the auditor with every kind of backend, through the CLI:
the anthropic and openai backends (the real SDKs, in the ``pact`` subprocess) against
LOCAL STAND-INS of their APIs that answer from the example's replay directory, and
the command backend running a real command-line agent (``tests/agents``).

In each run the example's ast_nodes (variety score 7) first restates its task, and its
first teachback omits an error case: the stand-ins and the agent must serve a
teachback, then a corrected one once the rejection comes back in the prompt, then the
work, then the auditor's verdict, in that order."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.acceptance.test_cli import pact
from tests.agents import fake_agent_argv, stage_agent_files
from tests.integration.test_anthropic_run import Oracle
from tests.standins.anthropic_server import AnthropicStandIn
from tests.standins.openai_server import TEACHBACK_HEADING, OpenAIStandIn

pytestmark = pytest.mark.slow

KEY = "sk-gates-test-0123456789abcdef"
KEY_ENV = "PACT_TEST_GATES_PROVIDER_KEY"
MODEL = "standin-gates-model"
PRICES = {"input_per_mtok": 3.0, "output_per_mtok": 15.0, "cache_read_per_mtok": 0.3}
UNSET = (
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_BASE_URL",
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "PACT_AGENT",
    "PACT_REPLAY_DIR",
    "PACT_PROJECT",
)
GATED = ("ast_nodes", "implement")


def run_blocking(example: Path, root: Path, agent: dict[str, Any]) -> dict[str, Any]:
    """``pact run`` of the example with gates: blocking and ``agent``; pact status."""
    root.mkdir()
    doc = {"gates": "blocking", "agents": {"default": agent}, "prices": {MODEL: PRICES}}
    (root / "pact.yaml").write_text(yaml.safe_dump(doc), encoding="utf-8")
    done = pact("run", str(example / "tree.json"), "--project", str(root), unset=UNSET)
    assert done.returncode == 0, done.stdout + done.stderr
    shown = pact("status", str(root), "--json", unset=UNSET)
    status: dict[str, Any] = json.loads(shown.stdout)
    assert status["status"] == "completed"
    return status


def gated_log(root: Path) -> list[dict[str, Any]]:
    lines = (root / ".pact" / "audit.jsonl").read_text().splitlines()
    events = [json.loads(line) for line in lines if line.strip()]
    return [e for e in events if (e.get("component_id"), e.get("phase")) == GATED]


def assert_the_gate_held_the_work(root: Path) -> None:
    log = gated_log(root)
    reviewed = [e for e in log if e["type"] == "teachback_reviewed"]
    assert [(e["approved"], e["reviewer"]) for e in reviewed] == [
        (False, "checker"),
        (True, "checker"),
        (True, "auditor"),
    ]
    assert "argument_not_node" in reviewed[0]["findings"][0]
    stages = [e["stage"] for e in log if e["type"] == "item_dispatched"]
    assert stages == ["teachback", "teachback", "audit", "work", "audit"]
    assert [e["approved"] for e in log if e["type"] == "audit_reviewed"] == [True]


def asked(user_prompts: list[str], component: str) -> list[str]:
    """What each request about ``component`` asked for, in order."""
    kinds = []
    for user in user_prompts:
        if user.splitlines()[0] != f"# Component {component}":
            continue
        if TEACHBACK_HEADING in user:
            kinds.append("teachback")
        elif "## Attempt under review" in user or "## Teachback under review" in user:
            kinds.append("audit")
        elif "## Contract (interface.json)" in user or "src/" in user:
            kinds.append("other")
    return kinds


@pytest.fixture
def key(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv(KEY_ENV, KEY)
    return KEY


def test_the_anthropic_stand_in_serves_teachbacks_and_the_auditors_verdict(
    example: Path, tmp_path: Path, key: str
) -> None:
    with AnthropicStandIn(api_key=key, oracle=Oracle(example / "replay")) as api:
        agent = {"backend": "anthropic", "model": MODEL, "base_url": api.url}
        agent["api_key_env"] = KEY_ENV
        run_blocking(example, tmp_path / "p", agent)
        users = [r.body["messages"][0]["content"][0]["text"] for r in api.requests]
    assert_the_gate_held_the_work(tmp_path / "p")
    kinds = asked(users, "ast_nodes")
    assert kinds[-5:] == ["teachback", "teachback", "audit", "other", "audit"]
    assert "teachback rejected" in [u for u in users if TEACHBACK_HEADING in u][1]
    assert [k for k in asked(users, "lexer") if k in ("teachback", "audit")] == []


def test_the_openai_stand_in_serves_teachbacks_and_the_auditors_verdict(
    example: Path, tmp_path: Path
) -> None:
    with OpenAIStandIn(oracle_dir=example / "replay") as server:
        agent = {"backend": "openai", "model": MODEL, "base_url": server.base_url}
        run_blocking(example, tmp_path / "p", agent)
        users = [
            next(m["content"] for m in r.body["messages"] if m["role"] == "user")
            for r in server.requests
        ]
        roles = [(s.component_id, s.role) for s in server.served]
        assert server.errors == []
    assert_the_gate_held_the_work(tmp_path / "p")
    expected = ["teachback", "teachback", "audit", "other", "audit"]
    assert asked(users, "ast_nodes")[-5:] == expected
    assert roles.count(("ast_nodes", "auditor")) == 2


def test_the_command_agent_writes_a_teachback_before_its_work(
    example: Path, tmp_path: Path
) -> None:
    files_dir = stage_agent_files(example / "replay", tmp_path / "agent-files")
    agent = {
        "backend": "command",
        "argv": fake_agent_argv(sys.executable),
        "files_dir": str(files_dir),
        "timeout_s": 120,
    }
    status = run_blocking(example, tmp_path / "p", agent)
    assert_the_gate_held_the_work(tmp_path / "p")
    assert status["gates"]["items"]["ast_nodes/implement"]["teachback_rounds"] == 1
