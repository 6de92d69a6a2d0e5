"""The scheduler service with real worker processes and a real redis-server.

Batches, fairness of completion, a service killed mid-run, submissions made while
no service runs, and the metrics it serves.
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import time
import urllib.request
from collections import Counter
from pathlib import Path

import pytest
import redis

from pact_workers.fleet import keys
from scheduler.audit import read_events
from scheduler.events import ItemDispatched, ItemSucceeded
from scheduler.fold import fold
from scheduler.project import ProjectDir
from scheduler.state import RunStatus
from tests.conftest import DATA
from tests.integration.fleet import Fleet, pact_argv

ALL_ROLES = ["contract_author", "test_author", "code_author", "integrator"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def copies(example: Path, directory: Path, n: int) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    out = []
    for i in range(n):
        path = directory / f"calc{i}.json"
        shutil.copyfile(example / "tree.json", path)
        out.append(path)
    return out


def submit(
    broker: str, trees: list[Path], example: Path, *extra: str
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        pact_argv(
            "submit",
            *map(str, trees),
            "--broker",
            broker,
            "--replay-dir",
            str(example / "replay"),
            *extra,
        ),
        capture_output=True,
        text=True,
        timeout=120,
    )


def runs(broker: str) -> list[dict[str, object]]:
    res = subprocess.run(
        pact_argv("runs", "--broker", broker, "--json"), capture_output=True, text=True, timeout=60
    )
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)  # type: ignore[no-any-return]


def wait_for(
    broker: str, run_ids: set[str], fleet: Fleet, timeout_s: float = 420
) -> list[dict[str, object]]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        entries = [e for e in runs(broker) if e["run_id"] in run_ids]
        if (
            entries
            and all(e["state"] in {"completed", "failed", "paused", "rejected"} for e in entries)
            and len(entries) == len(run_ids)
        ):
            return entries
        time.sleep(1.0)
    raise AssertionError(f"runs did not finish: {runs(broker)}\n{fleet.logs()}")


def check_applied_once(project_dir: Path) -> None:
    events, warnings = read_events(ProjectDir(project_dir).audit_path)
    assert warnings == []
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    state = fold(events)
    assert state.status is RunStatus.COMPLETED
    succeeded = Counter((e.component_id, e.phase) for e in events if isinstance(e, ItemSucceeded))
    assert set(succeeded.values()) == {1} and len(succeeded) == len(state.items)
    dispatched = Counter(
        (e.component_id, e.phase, e.attempt) for e in events if isinstance(e, ItemDispatched)
    )
    assert set(dispatched.values()) == {1}


def queued_ids(stdout: str) -> set[str]:
    return {line.rsplit(" ", 1)[1] for line in stdout.splitlines() if "queued as run" in line}


@pytest.mark.slow
def test_batch_with_a_malformed_tree_and_metrics(
    redis_url: str, example: Path, tmp_path: Path
) -> None:
    port = free_port()
    with Fleet(redis_url, tmp_path / "logs") as fleet:
        fleet.worker("w1", roles=ALL_ROLES, concurrency=3)
        fleet.worker("w2", roles=ALL_ROLES, concurrency=3)
        fleet.pact(
            "scheduler",
            "--broker",
            redis_url,
            "--runs-dir",
            str(tmp_path / "runs"),
            "--metrics-port",
            str(port),
            name="service",
        )
        trees = copies(example, tmp_path / "trees", 4)
        bad = DATA / "bad_trees" / "unknown_child.json"
        res = submit(redis_url, [*trees[:2], bad, *trees[2:]], example)
        assert res.returncode == 2
        assert "unknown_child.json" in res.stderr and "unknown child 'ghost'" in res.stderr
        first = queued_ids(res.stdout)
        assert len(first) == 4
        res = submit(redis_url, copies(example, tmp_path / "more", 5), example, "--priority", "2")
        assert res.returncode == 0, res.stderr
        second = queued_ids(res.stdout)
        assert len(second) == 5
        entries = wait_for(redis_url, first | second, fleet)
        assert {e["state"] for e in entries} == {"completed"}, entries
        for e in entries:
            assert e["items_done"] == e["items_total"] == 30
            check_applied_once(Path(str(e["project_dir"])))
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as resp:
            metrics = resp.read().decode()
        assert 'pact_runs{state="completed"} 9.0' in metrics
        assert 'pact_item_completions_total{role="code_author"}' in metrics
        assert "pact_in_flight_items" in metrics and "pact_lease_expiries_total" in metrics
        # Nine runs' short attempts on 6 slots per role: some went in packs.
        packed = [
            line for line in metrics.splitlines() if line.startswith("pact_packed_attempts_total")
        ]
        assert len(packed) == 1 and float(packed[0].split()[1]) > 0, packed


@pytest.mark.slow
def test_submissions_wait_for_a_service_that_is_down(
    redis_url: str, example: Path, tmp_path: Path
) -> None:
    res = submit(redis_url, copies(example, tmp_path / "trees", 2), example)
    assert res.returncode == 0, res.stderr
    ids = queued_ids(res.stdout)
    assert {e["state"] for e in runs(redis_url) if e["run_id"] in ids} == {"queued"}
    with Fleet(redis_url, tmp_path / "logs") as fleet:
        fleet.worker("w", roles=ALL_ROLES, concurrency=4)
        fleet.pact(
            "scheduler", "--broker", redis_url, "--runs-dir", str(tmp_path / "runs"), name="service"
        )
        entries = wait_for(redis_url, ids, fleet)
        assert {e["state"] for e in entries} == {"completed"}


@pytest.mark.slow
def test_service_killed_mid_run_and_restarted(
    redis_url: str, example: Path, tmp_path: Path
) -> None:
    runs_dir = tmp_path / "runs"
    with Fleet(redis_url, tmp_path / "logs") as fleet:
        fleet.worker("w1", roles=ALL_ROLES, concurrency=3)
        fleet.worker("w2", roles=ALL_ROLES, concurrency=3)
        service = fleet.pact(
            "scheduler", "--broker", redis_url, "--runs-dir", str(runs_dir), name="service"
        )
        res = submit(redis_url, copies(example, tmp_path / "trees", 3), example)
        ids = queued_ids(res.stdout)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            done = 0
            for audit in runs_dir.glob("*/.pact/audit.jsonl"):
                done += sum(isinstance(e, ItemSucceeded) for e in read_events(audit)[0])
            if done >= 20:
                break
            time.sleep(0.2)
        service.lose()
        time.sleep(3.0)  # workers keep finishing attempts; their results wait in the stream
        fleet.pact("scheduler", "--broker", redis_url, "--runs-dir", str(runs_dir), name="service")
        entries = wait_for(redis_url, ids, fleet)
        assert {e["state"] for e in entries} == {"completed"}, fleet.logs()
        for e in entries:
            check_applied_once(Path(str(e["project_dir"])))


def test_submit_settings_give_every_queued_run_the_agents_and_prices(
    redis_url: str, example: Path, tmp_path: Path
) -> None:
    """``pact submit --settings pact.yaml``: the runs' agent options carry its ``agents:``
    and ``prices:``; a missing or malformed file queues nothing (exit 2)."""
    trees = copies(example, tmp_path / "trees", 2)
    settings = tmp_path / "pact.yaml"
    settings.write_text(
        "agents:\n  default: {backend: openai, model: house-7, base_url: 'http://gpu:8000/v1'}\n"
        "prices:\n  house-7: {input_per_mtok: 1.5, output_per_mtok: 2.5}\n"
    )
    bad = tmp_path / "bad.yaml"
    bad.write_text("agents:\n  default: {backend: openai, modle: typo}\n")
    client = redis.Redis.from_url(redis_url)
    try:
        missing = submit(redis_url, trees, example, "--agent", "openai", "--settings", "nope.yaml")
        assert missing.returncode == 2 and "nope.yaml" in missing.stderr
        malformed = submit(redis_url, trees, example, "--agent", "openai", "--settings", str(bad))
        assert malformed.returncode == 2, malformed.stderr
        assert "bad.yaml" in malformed.stderr and "modle" in malformed.stderr
        assert client.xlen(keys.SUBMISSIONS) == 0
        res = submit(redis_url, trees, example, "--agent", "openai", "--settings", str(settings))
        assert res.returncode == 0, res.stderr
        entries = client.xrange(keys.SUBMISSIONS)
    finally:
        client.close()
    assert len(entries) == 2
    for _, fields in entries:
        sub = json.loads(fields[b"submission"])
        assert sub["agent"] == "openai"
        roles = json.loads(sub["agent_options"]["roles"])
        assert {r["model"] for r in roles.values()} == {"house-7"}
        assert {r["base_url"] for r in roles.values()} == {"http://gpu:8000/v1"}
        prices = json.loads(sub["agent_options"]["prices"])
        assert prices["house-7"]["input_per_mtok"] == 1.5
