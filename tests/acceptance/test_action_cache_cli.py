"""The action cache through the CLI, as a user meets it: the same tree run into a
second project directory on the same machine is served from the cache.

The runs use the ``anthropic`` backend (the real SDK, in the ``pact`` subprocesses)
against a LOCAL STAND-IN of the Messages API that answers from the example's replay
directory and bills tokens; the stand-in counts every request, so "no agent call"
is what the provider saw, not what the run says about itself.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.acceptance.test_cli import pact
from tests.integration.test_anthropic_run import Oracle
from tests.standins.anthropic_server import AnthropicStandIn

pytestmark = pytest.mark.slow

MODEL = "standin-cache-model"
PRICES = {"input_per_mtok": 3.0, "output_per_mtok": 15.0, "cache_read_per_mtok": 0.3}
KEY = "sk-cache-test-0123456789abcdef"
KEY_ENV = "PACT_TEST_CACHE_PROVIDER_KEY"
#: Nothing may reach a real provider, and the runs take their agent from pact.yaml.
UNSET = (
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_BASE_URL",
    "PACT_AGENT",
    "PACT_REPLAY_DIR",
    "PACT_PROJECT",
)


@pytest.fixture
def api(example: Path) -> Iterator[AnthropicStandIn]:
    with AnthropicStandIn(api_key=KEY, oracle=Oracle(example / "replay")) as server:
        yield server


@pytest.fixture
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(KEY_ENV, KEY)
    directory = tmp_path / "cache"
    monkeypatch.setenv("PACT_CACHE_DIR", str(directory))
    return directory


def project(tmp_path: Path, name: str, url: str, **settings: Any) -> Path:
    root = tmp_path / name
    root.mkdir()
    doc = {
        "agents": {
            "default": {
                "backend": "anthropic",
                "model": MODEL,
                "base_url": url,
                "api_key_env": KEY_ENV,
            }
        },
        "prices": {MODEL: PRICES},
        **settings,
    }
    (root / "pact.yaml").write_text(yaml.safe_dump(doc), encoding="utf-8")
    return root


def run(example: Path, root: Path) -> None:
    res = pact("run", str(example / "tree.json"), "--project", str(root), unset=UNSET)
    assert res.returncode == 0, res.stdout + res.stderr


def status(root: Path) -> dict[str, Any]:
    res = pact("status", str(root), "--json", unset=UNSET)
    assert res.returncode == 0, res.stdout + res.stderr
    doc: dict[str, Any] = json.loads(res.stdout)
    return doc


def test_a_tree_run_into_a_second_project_is_served_from_the_cache_and_off_calls_again(
    example: Path, tmp_path: Path, api: AnthropicStandIn, cache_dir: Path
) -> None:
    first = project(tmp_path, "first", api.url)
    run(example, first)
    items = sum(status(first)["items"].values())
    assert len(api.requests) == items  # one call per item: the oracle's answers all pass
    paid = status(first)["usage"]["cost_usd"]
    assert paid > 0 and status(first)["cache"]["hits"] == 0
    assert any(cache_dir.rglob("*.json"))

    second = project(tmp_path, "second", api.url)
    run(example, second)
    assert len(api.requests) == items  # not one more call
    doc = status(second)
    assert doc["status"] == "completed"
    assert doc["usage"]["cost_usd"] == 0 and doc["usage"]["input_tokens"] == 0
    assert doc["cache"]["mode"] == "verify"
    assert doc["cache"]["hits"] == items and doc["cache"]["dropped"] == 0
    assert doc["cache"]["saved_usd"] == pytest.approx(paid)
    assert all(row["cost_usd"] == 0 for row in doc["components"])
    shown = pact("status", str(second), unset=UNSET)
    assert shown.returncode == 0
    text = " ".join(shown.stdout.split())
    assert f"{items} items served from the action cache (verify)" in text
    assert "hit/hit/hit" in text
    assert (second / ".pact" / "implementations").is_dir()

    third = project(tmp_path, "third", api.url, cache="off")
    run(example, third)
    assert len(api.requests) == 2 * items  # every item asked the agent again
    doc = status(third)
    assert doc["cache"]["mode"] == "off" and doc["cache"]["hits"] == 0
    assert doc["usage"]["cost_usd"] > 0


def test_a_pact_cache_dir_that_cannot_hold_the_cache_is_refused_before_anything_is_written(
    example: Path, tmp_path: Path, api: AnthropicStandIn, cache_dir: Path, monkeypatch: Any
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory\n")
    monkeypatch.setenv("PACT_CACHE_DIR", str(blocker / "cache"))
    root = project(tmp_path, "refused", api.url)
    res = pact("run", str(example / "tree.json"), "--project", str(root), unset=UNSET)
    assert res.returncode == 2, res.stdout + res.stderr
    message = " ".join(res.stderr.split())
    assert "PACT_CACHE_DIR" in message and "a-file" in message
    assert not (root / ".pact").exists() and api.requests == []
