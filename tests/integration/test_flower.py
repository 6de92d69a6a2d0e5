"""Flower, started against the test Redis, sees the fleet through its HTTP API.

Flower runs as operators run it (``celery -A pact_workers.app flower``), with basic
auth; the test reads its API as a dashboard or a script would.
"""

from __future__ import annotations

import base64
import json
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from scheduler.audit import read_events
from scheduler.events import RunStarted
from scheduler.project import ProjectDir
from tests.integration.fleet import Fleet, Proc
from tests.integration.test_service import ALL_ROLES, free_port

AUTH = ("ops", "s3cret")


def get(url: str, *, auth: tuple[str, str] | None = AUTH) -> Any:
    request = urllib.request.Request(url)
    if auth:
        token = base64.b64encode(f"{auth[0]}:{auth[1]}".encode()).decode()
        request.add_header("Authorization", f"Basic {token}")
    with urllib.request.urlopen(request, timeout=30) as resp:
        return json.loads(resp.read().decode())


def wait_http(url: str, proc: Proc, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(url, timeout=5).close()
            return
        except urllib.error.HTTPError as exc:
            exc.close()  # its socket, else a garbage cycle finalises it unclosed later
            return  # it answers (401 without credentials)
        except OSError:
            time.sleep(0.3)
    raise AssertionError(f"flower did not answer at {url}\n{proc.describe()}")


@pytest.mark.slow
def test_flower_lists_workers_and_the_runs_tasks(
    redis_url: str, example: Path, tmp_path: Path
) -> None:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    with Fleet(redis_url, tmp_path / "logs") as fleet:
        flower = Proc(
            "flower",
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "pact_workers.app",
                "flower",
                f"--port={port}",
                "--address=127.0.0.1",
                f"--basic-auth={AUTH[0]}:{AUTH[1]}",
            ],
            tmp_path / "logs" / "flower.log",
            fleet.env(),
        )
        fleet.procs.append(flower)
        worker = fleet.worker("w", roles=ALL_ROLES, concurrency=3)
        wait_http(f"{base}/api/workers", flower)
        with pytest.raises(urllib.error.HTTPError) as denied:
            get(f"{base}/api/workers", auth=None)
        denied.value.close()
        assert denied.value.code == 401

        project = tmp_path / "project"
        run = fleet.pact(
            "run",
            str(example / "tree.json"),
            "--project",
            str(project),
            "--replay-dir",
            str(example / "replay"),
            "--executor",
            "celery",
            "--broker",
            redis_url,
            name="run",
        )
        assert run.wait(300) == 0, fleet.logs()
        run_id = next(
            e.run_id
            for e in read_events(ProjectDir(project).audit_path)[0]
            if isinstance(e, RunStarted)
        )

        workers = get(f"{base}/api/workers?refresh=1")
        assert any(name.startswith("pact-") for name in workers), workers
        mine = next(name for name in workers if name.startswith("pact-"))
        queues = {q["name"] for q in workers[mine].get("active_queues", [])}
        assert {"pact.code_author", "pact.integrator"} <= queues
        assert worker.running()

        deadline = time.monotonic() + 30
        tasks: dict[str, Any] = {}
        while time.monotonic() < deadline:
            tasks = get(f"{base}/api/tasks?limit=1000")
            if sum(f"run={run_id}" in (t.get("args") or "") for t in tasks.values()) >= 30:
                break
            time.sleep(1)
        ours = [t for t in tasks.values() if f"run={run_id}" in (t.get("args") or "")]
        assert len(ours) >= 30, tasks
        names = {t["name"] for t in ours}
        assert names == {
            "pact.contract_author",
            "pact.test_author",
            "pact.code_author",
            "pact.integrator",
        }
        sample = next(t for t in ours if t["name"] == "pact.code_author")
        assert "component=" in sample["args"] and "phase=implement" in sample["args"]
        assert "attempt=" in sample["args"]
        # The gates' record travels with every task: its variety score and gates.
        assert "score=" in sample["args"] and "teachback=" in sample["args"]
        assert {t["state"] for t in ours} == {"SUCCESS"}
