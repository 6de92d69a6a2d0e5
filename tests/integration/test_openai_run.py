"""The bundled example end to end through the CLI with the ``openai`` backend.

The backend (the real ``openai`` SDK) is pointed at a LOCAL STAND-IN server
(``tests.standins.openai_server`` in oracle mode), not at OpenAI: it answers every
request from the example's replay directory and records the tokens it bills. The run
must implement every component, and its cost totals must match those tokens at the
prices that ``pact.yaml`` sets for the model.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from pact_workers.models.work import Phase
from scheduler.audit import read_events
from scheduler.events import ItemFailed
from scheduler.project import ProjectDir
from scheduler.rebuild import rebuild_state
from scheduler.state import RunStatus
from tests.acceptance.test_cli import pact
from tests.standins.openai_server import ROLE_BY_PROMPT, OpenAIStandIn, Served

#: A model id no built-in price table knows: only pact.yaml can price it.
MODEL = "standin-oracle-1"
PRICES = {"input_per_mtok": 3.0, "output_per_mtok": 15.0, "cache_read_per_mtok": 0.3}

pytestmark = pytest.mark.slow


@dataclass(frozen=True)
class OracleRun:
    project: Path
    returncode: int
    output: str
    status: dict[str, Any]
    served: list[Served]
    requests: int


#: Neither a key nor OpenAI's URL reach the runs: the local stand-in needs no key, and
#: nothing may reach a real provider.
UNSET = ("OPENAI_API_KEY", "OPENAI_BASE_URL", "PACT_AGENT", "PACT_REPLAY_DIR")


def run_openai(
    example: Path, project: Path, settings: dict[str, Any]
) -> subprocess.CompletedProcess[str]:
    """``pact run --agent openai`` on the example with ``settings`` as its pact.yaml."""
    project.mkdir()
    (project / "pact.yaml").write_text(yaml.safe_dump(settings), encoding="utf-8")
    tree = str(example / "tree.json")
    return pact("run", tree, "--project", str(project), "--agent", "openai", unset=UNSET)


@pytest.fixture(scope="module")
def oracle_run(tmp_path_factory: pytest.TempPathFactory, example: Path) -> Iterator[OracleRun]:
    """``pact run --agent openai`` against the local stand-in, then ``pact status --json``."""
    project = tmp_path_factory.mktemp("openai-run") / "project"
    with OpenAIStandIn(oracle_dir=example / "replay") as server:
        settings = {
            "backoff_base_s": 0.05,
            "backoff_cap_s": 0.2,
            "agents": {
                "default": {
                    "backend": "openai",
                    "model": MODEL,
                    "base_url": server.base_url,
                    "idle_timeout_s": 60,
                    "max_retries": 1,
                }
            },
            "prices": {MODEL: PRICES},
        }
        run = run_openai(example, project, settings)
        served = list(server.served)
        requests = len(server.requests)
        assert server.errors == []
    status = pact("status", str(project), "--json", unset=UNSET)
    assert status.returncode == 0, status.stdout + status.stderr
    yield OracleRun(
        project=project,
        returncode=run.returncode,
        output=run.stdout + run.stderr,
        status=json.loads(status.stdout),
        served=served,
        requests=requests,
    )


def test_the_example_completes_with_every_component_implemented(
    oracle_run: OracleRun, example: Path
) -> None:
    """The run against the local stand-in server completes: every component's contract,
    tests and implementation are promoted, and each is what the oracle served."""
    assert oracle_run.returncode == 0, oracle_run.output
    status = oracle_run.status
    assert status["status"] == "completed"
    tree = json.loads((example / "tree.json").read_text())
    components = sorted(tree["nodes"])
    assert sorted(row["component_id"] for row in status["components"]) == components
    pact_dir = oracle_run.project / ".pact"
    for cid in components:
        source = (example / "replay" / cid / "src" / f"{cid}.py").read_bytes()
        assert (pact_dir / "implementations" / cid / "src" / f"{cid}.py").read_bytes() == source
        tests = (example / "replay" / cid / "tests" / "contract_test.py").read_bytes()
        assert (pact_dir / "contracts" / cid / "tests" / "contract_test.py").read_bytes() == tests
        results = json.loads((pact_dir / "implementations" / cid / "test_results.json").read_text())
        assert results["passed"] > 0 and results["failed"] == 0
    # One answer per component and role: nothing was retried or corrected.
    assert oracle_run.requests == len(oracle_run.served) == 3 * len(components)
    assert len({(s.component_id, s.role) for s in oracle_run.served}) == 3 * len(components)
    assert all(s.stream for s in oracle_run.served)


def test_the_runs_token_totals_match_what_the_stand_in_served(oracle_run: OracleRun) -> None:
    """The tokens ``pact status --json`` reports are the sums of the token counts the
    local stand-in server sent (cached prompt tokens count as input)."""
    usage = oracle_run.status["usage"]
    assert usage["input_tokens"] == sum(s.prompt_tokens for s in oracle_run.served)
    assert usage["output_tokens"] == sum(s.completion_tokens for s in oracle_run.served)
    assert any(s.cached_tokens for s in oracle_run.served)


def test_the_runs_cost_is_the_served_tokens_at_the_pact_yaml_prices(
    oracle_run: OracleRun,
) -> None:
    """The cost ``pact status --json`` reports is the local stand-in server's token counts
    priced as pact.yaml says: uncached input, cached input and output at their rates."""
    expected = (
        sum(
            (s.prompt_tokens - s.cached_tokens) * PRICES["input_per_mtok"]
            + s.cached_tokens * PRICES["cache_read_per_mtok"]
            + s.completion_tokens * PRICES["output_per_mtok"]
            for s in oracle_run.served
        )
        / 1_000_000
    )
    assert expected > 0
    assert oracle_run.status["usage"]["cost_usd"] == pytest.approx(expected, rel=1e-9)
    by_phase = sum(oracle_run.status["spend_by_phase"].values())
    assert by_phase == pytest.approx(expected, rel=1e-9)


@dataclass(frozen=True)
class RetryRun:
    project: Path
    returncode: int
    output: str
    requests: list[dict[str, Any]]
    served: list[Served]


@pytest.fixture(scope="module")
def retry_run(tmp_path_factory: pytest.TempPathFactory, example: Path) -> Iterator[RetryRun]:
    """The example with the ``openai`` backend and a trace analyst, where the local
    stand-in answers the evaluator's first implementation with the failing files the
    replay script names (as in the demo) and diagnoses the failure when asked."""
    project = tmp_path_factory.mktemp("openai-retry") / "project"
    with OpenAIStandIn(oracle_dir=example / "replay", first_attempts=True) as server:
        backend = {"backend": "openai", "model": MODEL, "base_url": server.base_url}
        settings = {
            "backoff_base_s": 0.05,
            "backoff_cap_s": 0.2,
            "agents": {"default": backend, "trace_analyst": backend},
            "prices": {MODEL: PRICES},
        }
        run = run_openai(example, project, settings)
        assert server.errors == []
        yield RetryRun(
            project=project,
            returncode=run.returncode,
            output=run.stdout + run.stderr,
            requests=[r.body for r in server.requests],
            served=list(server.served),
        )


def _role_and_user_prompt(body: dict[str, Any]) -> tuple[str, str]:
    """The role a request is for (by its system prompt) and its user prompt."""
    system = next(m["content"] for m in body["messages"] if m["role"] == "system")
    user = next(m["content"] for m in body["messages"] if m["role"] == "user")
    role = next((r for words, r in ROLE_BY_PROMPT.items() if system.startswith(words)), "")
    return role, user


def test_a_retry_through_the_sdk_carries_the_failures_what_changed_and_a_diagnosis(
    retry_run: RetryRun, example: Path
) -> None:
    """The evaluator's first implementation fails its tests; the trace analyst is asked
    once, with the failing tests and the failed files; the code author's retry prompt
    carries both and the diagnosis, never a line of the tests; the run completes."""
    assert retry_run.returncode == 0, retry_run.output
    events, _ = read_events(ProjectDir(retry_run.project).audit_path)
    failed = [e for e in events if isinstance(e, ItemFailed)]
    assert [(e.component_id, e.phase, e.attempt) for e in failed] == [
        ("evaluator", Phase.IMPLEMENT, 1)
    ]
    assert failed[0].output is not None and failed[0].test_results is not None
    failing = sorted({f.test_id for f in failed[0].test_results.failure_details})
    assert failing
    # Requests in the order they came (served entries are recorded as answers finish).
    prompts = [
        (role, user)
        for role, user in map(_role_and_user_prompt, retry_run.requests)
        if user.startswith("# Component evaluator\n") and role in {"code_author", "trace_analyst"}
    ]
    assert [role for role, _ in prompts] == ["code_author", "trace_analyst", "code_author"]
    (_, first), (_, analyst), (_, retry) = prompts
    attempt_1 = (example / "replay/evaluator/attempts/implement-1/src/evaluator.py").read_text()
    tests = (example / "replay/evaluator/tests/contract_test.py").read_text()
    assert "previous attempt" not in first
    for prompt in (analyst, retry):
        assert all(f"- {test_id}: " in prompt for test_id in failing)
        assert "### What attempt 1 wrote" in prompt
        assert all(f"+{line}" in prompt for line in attempt_1.splitlines() if line.strip())
        assert not [line for line in tests.splitlines() if "def test_" in line and line in prompt]
    assert "### Diagnosis of the failure (trace analyst)" in retry
    assert f"{len(failing)} contract tests fail: {', '.join(failing)}" in retry
    state = rebuild_state(retry_run.project)
    assert state.status is RunStatus.COMPLETED
    assert state.item("evaluator", Phase.IMPLEMENT).attempt == 2


def test_the_analysts_call_counts_in_the_runs_cost(retry_run: RetryRun) -> None:
    expected = (
        sum(
            (s.prompt_tokens - s.cached_tokens) * PRICES["input_per_mtok"]
            + s.cached_tokens * PRICES["cache_read_per_mtok"]
            + s.completion_tokens * PRICES["output_per_mtok"]
            for s in retry_run.served
        )
        / 1_000_000
    )
    assert any(s.role == "trace_analyst" for s in retry_run.served)
    state = rebuild_state(retry_run.project)
    assert state.usage.cost_usd == pytest.approx(expected, rel=1e-9)
