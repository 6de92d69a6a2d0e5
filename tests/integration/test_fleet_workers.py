"""Worker heartbeats: ``pact workers`` lists the live workers and the roles none serves;
``pact doctor --broker`` and ``pact run --executor celery`` say what a run would wait
for; a worker that stops or is killed drops out (real redis-server, real workers)."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.integration.fleet import Fleet, pact_argv

HEARTBEAT_S = 0.5

pytestmark = pytest.mark.slow


def pact(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(pact_argv(*args), capture_output=True, text=True, timeout=60)


def listed(broker: str) -> dict[str, Any]:
    res = pact("workers", "--broker", broker, "--json")
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)  # type: ignore[no-any-return]


def eventually(check: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        if time.monotonic() > deadline:
            pytest.fail(f"not within {timeout_s} s: {what}")
        time.sleep(0.2)


def test_workers_are_listed_by_role_and_drop_out_when_they_stop_or_die(
    redis_url: str, example: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PACT_WORKER_HEARTBEAT_S", str(HEARTBEAT_S))
    with Fleet(redis_url, tmp_path / "logs") as fleet:
        assert listed(redis_url) == {
            "workers": {},
            "roles_without_workers": [
                "contract_author",
                "test_author",
                "code_author",
                "integrator",
            ],
        }
        authors = fleet.worker("authors", roles=["contract_author", "test_author"], concurrency=3)
        eventually(lambda: len(listed(redis_url)["workers"]) == 1, 10, "the worker is listed")
        doc = listed(redis_url)
        (info,) = doc["workers"].values()
        assert info["roles"] == ["contract_author", "test_author"]
        assert info["concurrency"] == 3 and info["pid"] > 0
        assert doc["roles_without_workers"] == ["code_author", "integrator"]

        doctor = pact("doctor", str(tmp_path), "--broker", redis_url)
        assert doctor.returncode == 1, doctor.stdout
        assert "no worker serves code_author, integrator" in doctor.stdout
        assert "pact worker --roles code_author,integrator" in doctor.stdout

        # A run started now says what it waits for, and completes once a worker comes.
        run = fleet.run(
            example / "tree.json", tmp_path / "project", "--replay-dir", str(example / "replay")
        )
        coders = fleet.worker("coders", roles=["code_author", "integrator"])
        assert fleet.wait(run, 300) == 0, fleet.logs()
        assert "no live worker serves code_author, integrator" in run.log.read_text()
        assert listed(redis_url)["roles_without_workers"] == []
        assert pact("doctor", str(tmp_path), "--broker", redis_url).returncode == 0

        coders.stop()  # a clean stop removes its heartbeat at once
        assert listed(redis_url)["roles_without_workers"] == ["code_author", "integrator"]
        authors.lose()  # a killed worker's heartbeat expires after three beats
        eventually(lambda: listed(redis_url)["workers"] == {}, 10, "the killed worker expires")
