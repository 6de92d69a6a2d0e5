"""A run whose model provider cannot be reached pauses, and ``pact resume`` finishes it.

``pact run --agent anthropic`` (or ``openai``), through the CLI in a subprocess, with the
key in the environment and ``base_url`` pointing at a local port where connections are
REFUSED: nothing listens there yet. Every agent call fails the way an offline worker's
does. The run must pause (exit 1) as soon as the same unreachable provider has failed
``systemic_threshold`` components, with nothing failed and nothing poisoned, and say
that the provider is unreachable. Then the LOCAL STAND-IN of the provider's API
(``tests.standins``: the official SDK's wire format, an oracle answering from the
example's replay directory; not the real provider) starts on that very port, and
``pact resume`` completes the run.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import pytest
import yaml

from pact_workers.errors import UNREACHABLE_PREFIX
from pact_workers.models.work import Phase
from scheduler.audit import read_events
from scheduler.events import ItemFailed
from scheduler.project import ProjectDir
from tests.acceptance.test_cli import pact
from tests.integration.conftest import free_port
from tests.integration.test_anthropic_run import Oracle
from tests.standins.anthropic_server import AnthropicStandIn
from tests.standins.openai_server import OpenAIStandIn

pytestmark = pytest.mark.slow

MODEL = "standin-outage-model"
PRICES = {"input_per_mtok": 3.0, "output_per_mtok": 15.0, "cache_read_per_mtok": 0.3}
KEY = "sk-outage-test-0123456789abcdef"
KEY_ENV = "PACT_TEST_PROVIDER_KEY"
#: The contracts ready at the start of the example (no dependencies): exactly the
#: systemic threshold, so the first wave alone shows the outage.
FIRST_WAVE = ["ast_nodes", "environment", "tokens"]
#: Variables the runs must not inherit: nothing may reach a real provider.
UNSET = (
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_BASE_URL",
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "PACT_AGENT",
    "PACT_REPLAY_DIR",
    "PACT_PROJECT",
)

StandIn = Callable[[Path, int], AbstractContextManager[Any]]


def anthropic_standin(replay: Path, port: int) -> AbstractContextManager[Any]:
    return AnthropicStandIn(api_key=KEY, oracle=Oracle(replay), port=port)


def openai_standin(replay: Path, port: int) -> AbstractContextManager[Any]:
    return OpenAIStandIn(oracle_dir=replay, api_key=KEY, port=port)


BACKENDS: dict[str, tuple[str, StandIn]] = {
    "anthropic": ("http://127.0.0.1:{port}", anthropic_standin),
    "openai": ("http://127.0.0.1:{port}/v1", openai_standin),
}


def status(project: Path) -> dict[str, Any]:
    res = pact("status", str(project), "--json", unset=UNSET)
    assert res.returncode == 0, res.stdout + res.stderr
    doc: dict[str, Any] = json.loads(res.stdout)
    return doc


def output(res: subprocess.CompletedProcess[str]) -> str:
    return res.stdout + res.stderr


@pytest.mark.parametrize("backend", sorted(BACKENDS))
def test_an_unreachable_provider_pauses_the_run_and_resume_completes_it_once_it_answers(
    backend: str, example: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url_form, standin = BACKENDS[backend]
    port = free_port()  # reserved and released: nothing listens there, connections are refused
    base_url = url_form.format(port=port)
    project = tmp_path / "project"
    project.mkdir()
    settings = {
        "max_retries": 2,
        "backoff_base_s": 0.05,
        "backoff_cap_s": 0.2,
        "agents": {
            "default": {
                "backend": backend,
                "model": MODEL,
                "base_url": base_url,
                "api_key_env": KEY_ENV,
                "idle_timeout_s": 30,
                "max_retries": 0,  # the backend's own retries: the scheduler's are enough here
            }
        },
        "prices": {MODEL: PRICES},
    }
    (project / "pact.yaml").write_text(yaml.safe_dump(settings), encoding="utf-8")
    monkeypatch.setenv(KEY_ENV, KEY)

    run = pact(
        "run", str(example / "tree.json"), "--project", str(project), "--agent", backend,
        unset=UNSET,
    )  # fmt: skip

    assert run.returncode == 1, output(run)
    paused = status(project)
    assert paused["status"] == "paused", paused
    assert "failed" not in paused["items"] and "poisoned" not in paused["items"], paused
    assert paused["poisoned"] == {}
    assert UNREACHABLE_PREFIX + f"127.0.0.1:{port}" in paused["pause_reason"]
    assert "refused" in paused["pause_reason"].lower()
    # Paused at once, as systemic, on the first wave: not after every retry was spent.
    assert paused["pattern_type"] == "provider_unreachable"
    assert sorted(paused["affected_components"]) == FIRST_WAVE
    assert "pact resume" in paused["recommendation"]
    events, _ = read_events(ProjectDir(project).audit_path)
    failures = [e for e in events if isinstance(e, ItemFailed)]
    assert failures and all(e.error_class == "transient" for e in failures)
    assert {e.component_id for e in failures} == set(FIRST_WAVE)
    assert all(e.phase is Phase.CONTRACT and e.decision == "retry" for e in failures)
    assert all(KEY not in e.error for e in failures)

    with standin(example / "replay", port):
        resumed = pact("resume", str(project), unset=UNSET)

    assert resumed.returncode == 0, output(resumed)
    done = status(project)
    assert done["status"] == "completed", done
    components = json.loads((example / "tree.json").read_text())["nodes"]
    assert done["items"] == {"done": 3 * len(components)}
    assert KEY not in output(run) + output(resumed)
    assert KEY not in (project / ".pact" / "audit.jsonl").read_text()
