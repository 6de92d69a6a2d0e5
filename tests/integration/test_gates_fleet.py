"""The gates on the fleet: a run the scheduler service drives with ``gates: blocking``
and ``review: gated`` has ast_nodes restate its task (a teachback, corrected once) on a
code author's queue, then its verified attempt reviewed by a worker serving only
``pact.auditor``, then it pauses with ast_nodes awaiting review; ``pact approve`` /
``pact reject --broker`` hand it back to the services, which carry it on. A real
redis-server, a real ``pact scheduler`` process and real Celery worker processes."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest
import redis

from pact_workers.fleet import keys
from scheduler.audit import is_driven, read_events
from scheduler.events import ItemDispatched
from scheduler.executors.celery_executor import CeleryExecutor
from scheduler.gates.events import ReviewDecided, ReviewRequested
from scheduler.gates.fleet import (
    ReviewRequest,
    decision_events,
    send_review_request,
    take_review_requests,
)
from scheduler.launch import load_state
from scheduler.project import ProjectDir
from scheduler.run import RunController
from scheduler.settings import load_settings
from tests.integration.fleet import Fleet, pact_argv
from tests.integration.test_service import ALL_ROLES, queued_ids, runs, submit

pytestmark = [pytest.mark.slow, pytest.mark.redis]

GATED = "ast_nodes/implement"


def wait_for_state(
    broker: str, run_id: str, wanted: str, fleet: Fleet, timeout_s: float = 240
) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        entry = next((e for e in runs(broker) if e["run_id"] == run_id), None)
        if entry is not None and entry["state"] == wanted:
            return
        time.sleep(0.5)
    raise AssertionError(f"run {run_id} never {wanted}: {runs(broker)}\n{fleet.logs()}")


def gated_project(path: Path) -> Path:
    """A new project directory whose pact.yaml sets ``review: gated``."""
    path.mkdir()
    (path / "pact.yaml").write_text("review: gated\n")
    return path


def pact(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(pact_argv(*args), capture_output=True, text=True, timeout=120)


def test_review_gated_on_the_fleet_pauses_and_approve_and_reject_hand_the_run_back(
    redis_url: str, example: Path, tmp_path: Path
) -> None:
    runs_dir = tmp_path / "runs"
    res = submit(redis_url, [example / "tree.json"], example)
    assert res.returncode == 0, res.stderr
    (run_id,) = queued_ids(res.stdout)
    # The run's pact.yaml, there before a service creates the run.
    run_dir = runs_dir / run_id
    run_dir.mkdir(parents=True)
    (run_dir / "pact.yaml").write_text("gates: blocking\nreview: gated\n")
    with Fleet(redis_url, tmp_path / "logs") as fleet:
        fleet.worker("w", roles=ALL_ROLES, concurrency=4)
        fleet.worker("auditor", roles=["auditor"], concurrency=1)
        fleet.pact("scheduler", "--broker", redis_url, "--runs-dir", str(runs_dir), name="service")
        wait_for_state(redis_url, run_id, "paused", fleet)
        state, _ = load_state(ProjectDir(run_dir))
        assert state.item("ast_nodes", "implement").status.value == "awaiting_review"
        shown = pact("status", str(run_dir), "--json")
        assert json.loads(shown.stdout)["gates"]["awaiting_review"] == [GATED]

        note = "format_node must not add spaces inside parentheses"
        done = pact(
            "reject", str(run_dir), GATED, "--note", note, "--by", "carol", "--broker", redis_url
        )
        assert done.returncode == 0, done.stdout + done.stderr
        assert "handed back to the scheduler services" in done.stdout
        # A service adopts it; the new attempt waits for review again.
        wait_for_state(redis_url, run_id, "paused", fleet)
        events = read_events(ProjectDir(run_dir).audit_path)[0]
        attempts = [
            e
            for e in events
            if isinstance(e, ItemDispatched)
            and (e.component_id, e.phase.value) == ("ast_nodes", "implement")
        ]
        assert [e.stage for e in attempts] == [
            "teachback",
            "teachback",
            "audit",
            "work",
            "audit",
            "work",
            "audit",
        ]
        assert any(note in f.summary for f in attempts[5].feedback)

        done = pact("approve", str(run_dir), "ast_nodes", "--by", "dave", "--broker", redis_url)
        assert done.returncode == 0, done.stdout + done.stderr
        wait_for_state(redis_url, run_id, "completed", fleet)
    events = read_events(ProjectDir(run_dir).audit_path)[0]
    decided = [(e.approved, e.by) for e in events if isinstance(e, ReviewDecided)]
    assert decided == [(False, "carol"), (True, "dave")]
    assert [e.attempt for e in events if isinstance(e, ReviewRequested)] == [5, 7]
    assert (run_dir / ".pact" / "implementations" / "ast_nodes" / "src" / "ast_nodes.py").is_file()
    # The audits went to pact.auditor, which only the auditor worker consumes.
    assert (tmp_path / "logs" / "auditor.log").read_text().count("pact.auditor[") >= 3


def test_review_requests_through_redis_are_taken_once_and_only_for_waiting_items(
    redis_url: str, tmp_path: Path, example: Path
) -> None:
    project = gated_project(tmp_path / "p")
    done = pact(
        "run",
        str(example / "tree.json"),
        "--project",
        str(project),
        "--replay-dir",
        str(example / "replay"),
    )
    assert done.returncode == 3, done.stderr
    state, _ = load_state(ProjectDir(project))
    client = redis.Redis.from_url(redis_url)
    try:
        send_review_request(client, state.run_id, ReviewRequest(item=GATED, approved=True, by="e"))
        send_review_request(
            client, state.run_id, ReviewRequest(item="lexer/implement", approved=True, by="e")
        )
        assert client.ttl(keys.review_requests(state.run_id)) > 0
        taken = take_review_requests(client, state.run_id)
        assert [r.item for r in taken] == [GATED, "lexer/implement"]
        assert take_review_requests(client, state.run_id) == []
    finally:
        client.close()
    events = decision_events(state, taken)
    assert [(e.component_id, e.phase.value, e.approved, e.by) for e in events] == [
        ("ast_nodes", "implement", True, "e")
    ]


def test_the_scheduler_driving_a_run_applies_a_decision_sent_through_redis(
    redis_url: str, tmp_path: Path, example: Path
) -> None:
    project_dir = gated_project(tmp_path / "p")
    done = pact(
        "run",
        str(example / "tree.json"),
        "--project",
        str(project_dir),
        "--replay-dir",
        str(example / "replay"),
    )
    assert done.returncode == 3, done.stderr
    project = ProjectDir(project_dir)
    run_id = load_state(project)[0].run_id
    # The run driven over the fleet, as a scheduler holding it would: a real
    # CeleryExecutor on the real Redis (no attempt is in flight, so no worker is needed).
    executor = CeleryExecutor.single_run(redis_url, run_id, capacity=4)
    controller = RunController(
        project,
        executor=executor,
        store=project.store(),
        settings=load_settings(project.settings_path),
    )
    controller.open()
    try:
        assert is_driven(project.audit_path)
        refused = pact("approve", str(project_dir), "ast_nodes")
        assert refused.returncode == 2 and "--broker" in refused.stderr
        sent = pact("approve", str(project_dir), "ast_nodes", "--by", "erin", "--broker", redis_url)
        assert sent.returncode == 0, sent.stderr
        assert "sent to the scheduler that drives the run" in sent.stdout
        controller.tick(had_results=False)  # its next turn takes the decision
    finally:
        controller.close()
        executor.close()
    state = load_state(project)[0]
    assert state.item("ast_nodes", "implement").status.value == "done"
    decided = [e for e in read_events(project.audit_path)[0] if isinstance(e, ReviewDecided)]
    assert [(e.approved, e.by) for e in decided] == [(True, "erin")]
    assert (project.implementations_dir / "ast_nodes" / "src" / "ast_nodes.py").is_file()
