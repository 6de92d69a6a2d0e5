"""The bundled example through the fleet with the ``anthropic`` backend.

The backend (the real ``anthropic`` SDK, in real worker processes) is pointed at a LOCAL
STAND-IN of the Messages API (``tests.standins.anthropic_server``), not at Anthropic: an
oracle answers each request from the example's replay directory with a forced tool call
and bills tokens the way the API does, the role's cached system prompt as cache reads
after its first use. The key is only in the workers' environment. The run must
complete, and its cost must be those tokens at the pact.yaml prices.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest
import yaml

from scheduler.rebuild import rebuild_state
from scheduler.state import RunStatus
from tests.integration.fleet import Fleet
from tests.integration.test_docker_runs import ALL_ROLES
from tests.standins.anthropic_server import AnthropicStandIn, ErrorReply, ToolAnswer
from tests.standins.openai_server import TEACHBACK_HEADING, teachback_answer

KEY = "sk-ant-standin-fleet-0123456789"
MODEL = "claude-standin-oracle"
PRICES = {
    "input_per_mtok": 3.0,
    "output_per_mtok": 15.0,
    "cache_write_per_mtok": 3.75,
    "cache_read_per_mtok": 0.3,
}
ROLES = {
    "You are the contract author": "contract_author",
    "You are the test author": "test_author",
    "You are the code author": "code_author",
    "You are the integrator": "integrator",
    "You are the auditor": "auditor",
}

pytestmark = pytest.mark.slow


class Oracle:
    """Answers from a replay directory; records what it billed, per request."""

    def __init__(self, replay: Path) -> None:
        self.replay = replay
        self.billed: list[ToolAnswer] = []
        self.roles: list[tuple[str, str]] = []
        self._seen: set[str] = set()
        self._lock = threading.Lock()

    def __call__(self, body: dict[str, Any]) -> ToolAnswer | ErrorReply:
        system = "".join(block["text"] for block in body["system"])
        user = body["messages"][0]["content"][0]["text"]
        role = next((r for words, r in ROLES.items() if system.startswith(words)), "")
        cid = user.splitlines()[0].removeprefix("# Component ").strip()
        if not role or not (self.replay / cid).is_dir():
            return ErrorReply(400, "invalid_request_error", "the oracle cannot tell the task")
        base = self.replay / cid
        data: Any
        if TEACHBACK_HEADING in user:
            data = teachback_answer(base, user)
        elif role == "auditor":
            data = json.loads((base / "audit.json").read_text())
        elif role == "contract_author":
            data = json.loads((base / "interface.json").read_text())
        elif role == "test_author":
            data = {"test_code": (base / "tests/contract_test.py").read_text(), "test_cases": []}
        else:
            data = {"files": {f"{cid}.py": (base / "src" / f"{cid}.py").read_text()}}
        prefix = len(system) // 4  # the cached part: the role's instructions (and the tool)
        with self._lock:
            cached = system in self._seen
            self._seen.add(system)
            answer = ToolAnswer(
                data,
                input_tokens=len(user) // 4,
                output_tokens=len(json.dumps(data)) // 4,
                cache_write_tokens=0 if cached else prefix,
                cache_read_tokens=prefix if cached else 0,
            )
            self.billed.append(answer)
            self.roles.append((cid, role))
        return answer


def test_the_example_completes_through_the_fleet_with_the_anthropic_backend(
    redis_url: str, example: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    project = tmp_path / "project"
    project.mkdir()
    oracle = Oracle(example / "replay")
    with (
        AnthropicStandIn(api_key=KEY, oracle=oracle) as api,
        Fleet(redis_url, tmp_path / "logs") as fleet,
    ):
        settings = {
            "agents": {"default": {"backend": "anthropic", "model": MODEL, "base_url": api.url}},
            "prices": {MODEL: PRICES},
        }
        (project / "pact.yaml").write_text(yaml.safe_dump(settings), encoding="utf-8")
        fleet.worker("w", roles=ALL_ROLES, concurrency=3, env={"ANTHROPIC_API_KEY": KEY})
        run = fleet.run(example / "tree.json", project, "--agent", "anthropic")
        assert fleet.wait(run, 300) == 0, fleet.logs()
        requests = api.requests

    state = rebuild_state(project)
    assert state.status is RunStatus.COMPLETED
    components = json.loads((example / "tree.json").read_text())["nodes"]
    assert len(oracle.billed) == len(requests) == 3 * len(components)
    assert len(set(oracle.roles)) == 3 * len(components)  # one answer per component, role
    # Every request: streamed, the tool forced, the stable prefix marked for caching, the
    # key in its header only.
    for request in requests:
        body = request.body
        assert body["stream"] is True and body["model"] == MODEL
        assert body["tool_choice"]["type"] == "tool"
        assert body["system"][-1]["cache_control"] == {"type": "ephemeral"}
        assert request.key_headers and not request.key_elsewhere
    assert sum(a.cache_read_tokens for a in oracle.billed) > 0
    assert state.usage.input_tokens == sum(
        a.input_tokens + a.cache_write_tokens + a.cache_read_tokens for a in oracle.billed
    )
    assert state.usage.output_tokens == sum(a.output_tokens for a in oracle.billed)
    expected = (
        sum(
            a.input_tokens * PRICES["input_per_mtok"]
            + a.cache_write_tokens * PRICES["cache_write_per_mtok"]
            + a.cache_read_tokens * PRICES["cache_read_per_mtok"]
            + a.output_tokens * PRICES["output_per_mtok"]
            for a in oracle.billed
        )
        / 1_000_000
    )
    assert state.usage.cost_usd == pytest.approx(expected, rel=1e-9)
