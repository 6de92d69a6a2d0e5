"""The bundled example end to end through the CLI with the ``openai`` backend.

The backend (the real ``openai`` SDK) is pointed at a LOCAL STAND-IN server
(``tests.standins.openai_server`` in oracle mode), not at OpenAI: it answers every
request from the example's replay directory and records the tokens it bills. The run
must implement every component, and its cost totals must match those tokens at the
prices that ``pact.yaml`` sets for the model.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import REPO
from tests.standins.openai_server import OpenAIStandIn, Served

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


def pact(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "scheduler.cli", *args],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
        cwd=REPO,
    )


@pytest.fixture(scope="module")
def oracle_run(tmp_path_factory: pytest.TempPathFactory, example: Path) -> Iterator[OracleRun]:
    """``pact run --agent openai`` against the local stand-in, then ``pact status --json``."""
    root = tmp_path_factory.mktemp("openai-run")
    project = root / "project"
    project.mkdir()
    # Neither a key nor OpenAI's URL: the local stand-in needs no key, and nothing may
    # reach a real provider.
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in {"OPENAI_API_KEY", "OPENAI_BASE_URL", "PACT_AGENT", "PACT_REPLAY_DIR"}
    }
    env.update({"COLUMNS": "200", "NO_COLOR": "1"})
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
        (project / "pact.yaml").write_text(yaml.safe_dump(settings), encoding="utf-8")
        run = pact(
            "run",
            str(example / "tree.json"),
            "--project",
            str(project),
            "--agent",
            "openai",
            env=env,
        )
        served = list(server.served)
        requests = len(server.requests)
        assert server.errors == []
    status = pact("status", str(project), "--json", env=env)
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
