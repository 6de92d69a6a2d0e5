"""API keys stay on the workers: a fleet run with the ``openai`` backend, whose key only
the worker's environment holds, completes the bundled example, and the key appears in
no command sent to Redis, no file of the run and no log.

The provider is a LOCAL STAND-IN server (``tests.standins.openai_server``, oracle mode)
that requires the key, so a completed run also shows that the worker sent it.
"""

from __future__ import annotations

import base64
import binascii
import re
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
import yaml

from scheduler.rebuild import rebuild_state
from scheduler.state import RunStatus
from tests.integration.fleet import Fleet
from tests.integration.test_docker_runs import ALL_ROLES
from tests.standins.openai_server import OpenAIStandIn

SECRET = "sk-standin-0123456789abcdefSECRET"
KEY_ENV = "PACT_TEST_PROVIDER_KEY"
MODEL = "standin-oracle-1"
#: A kombu message body inside a MONITOR line (escaped JSON, base64 payload).
_BODY = re.compile(r'body\\*"\s*:\s*\\*"([A-Za-z0-9+/=]{16,})')

pytestmark = pytest.mark.slow


class RedisMonitor:
    """Every command any client sends to the server while it runs (Redis MONITOR)."""

    def __init__(self, url: str) -> None:
        # No socket timeout (redis-py's default is 5 s): the server may say nothing for
        # longer while the fleet's processes start on a busy machine.
        self.client = redis.Redis.from_url(url, socket_timeout=None)
        self.commands: list[str] = []
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._monitor: Any = None
        self._closing = False
        #: Why the reader stopped before it was closed (what it saw is then incomplete).
        self.died: str | None = None

    def __enter__(self) -> RedisMonitor:
        self._monitor = self.client.monitor().__enter__()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._closing = True
        self._monitor.connection.disconnect()  # wakes the reader, which then ends
        self._thread.join(10)
        self.client.close()

    def _read(self) -> None:
        try:
            while True:
                self.commands.append(self._monitor.next_command()["command"])
        except Exception as exc:  # the connection closed under it: monitoring is over
            if not self._closing:
                self.died = repr(exc)
            return

    def payloads(self) -> Iterator[str]:
        """Each command, then each base64 message body found in it, decoded."""
        for command in self.commands:
            yield command
            for match in _BODY.finditer(command):
                try:
                    yield base64.b64decode(match.group(1)).decode("utf-8", "replace")
                except (binascii.Error, ValueError):
                    continue


def test_a_key_only_the_worker_has_reaches_the_provider_and_nothing_else(
    redis_url: str, example: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(KEY_ENV, raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    project = tmp_path / "project"
    project.mkdir()
    with (
        OpenAIStandIn(oracle_dir=example / "replay", api_key=SECRET) as server,
        RedisMonitor(redis_url) as monitor,
        Fleet(redis_url, tmp_path / "logs") as fleet,
    ):
        settings = {
            "agents": {
                "default": {
                    "backend": "openai",
                    "model": MODEL,
                    "base_url": server.base_url,
                    "api_key_env": KEY_ENV,
                    "max_retries": 1,
                }
            },
            "prices": {MODEL: {"input_per_mtok": 3.0, "output_per_mtok": 15.0}},
        }
        (project / "pact.yaml").write_text(yaml.safe_dump(settings), encoding="utf-8")
        fleet.worker("w", roles=ALL_ROLES, concurrency=3, env={KEY_ENV: SECRET})
        run = fleet.run(example / "tree.json", project, "--agent", "openai")
        assert fleet.wait(run, 300) == 0, fleet.logs()
        logs = fleet.logs()
        requests = list(server.requests)
        assert server.errors == []

    state = rebuild_state(project)
    assert state.status is RunStatus.COMPLETED
    assert state.usage.cost_usd > 0
    # The stand-in refuses a wrong or missing key: every call carried the worker's.
    assert requests and all(r.had_key for r in requests)
    # What went through Redis: the task messages name the variable, never its value.
    assert monitor.died is None, f"the MONITOR reader stopped early: {monitor.died}"
    payloads = list(monitor.payloads())
    assert any(KEY_ENV in p and "agent_options" in p for p in payloads), "no task seen"
    assert not [p[:200] for p in payloads if SECRET in p]
    # Nothing of the run on disk, and no log of any process, holds it.
    for path in project.rglob("*"):
        if path.is_file():
            assert SECRET.encode() not in path.read_bytes(), path
    assert SECRET not in logs
