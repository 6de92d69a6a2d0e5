"""The item lifecycle through the CLI: what workers report (running, verifying) is in
the log and in ``pact status``; a log with an illegal move is refused, naming it."""

from __future__ import annotations

import json
from pathlib import Path

from tests.acceptance.test_cli import pact


def events(project: Path) -> list[dict[str, object]]:
    lines = (project / ".pact" / "audit.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def test_every_verified_implementation_was_reported_running_then_verifying(
    tmp_path: Path,
) -> None:
    project = tmp_path / "demo"
    res = pact("demo", str(project))
    assert res.returncode == 0, res.stderr
    log = events(project)
    for done in (e for e in log if e["type"] == "item_succeeded" and e["phase"] == "implement"):
        key = (done["component_id"], done["phase"], done["attempt"])
        seen = [
            e["status"]
            for e in log
            if e["type"] == "item_progress" and (e["component_id"], e["phase"], e["attempt"]) == key
        ]
        assert seen == ["running", "verifying"], (key, seen)


def test_status_shows_an_attempt_a_worker_reports_as_verifying(tmp_path: Path) -> None:
    project = tmp_path / "demo"
    assert pact("demo", str(project)).returncode == 0
    log = (project / ".pact" / "audit.jsonl").read_text(encoding="utf-8").splitlines()
    # Cut the log right after an implementation was reported verifying: what a status
    # taken at that moment shows.
    at = next(i for i, line in enumerate(log) if '"status":"verifying"' in line)
    (project / ".pact" / "audit.jsonl").write_text("\n".join(log[: at + 1]) + "\n")
    (project / ".pact" / "state.json").unlink()
    status = json.loads(pact("status", str(project), "--json").stdout)
    assert status["items"].get("verifying") == 1


def test_a_log_with_an_illegal_move_is_refused_with_the_event_and_item_named(
    tmp_path: Path,
) -> None:
    project = tmp_path / "demo"
    assert pact("demo", str(project)).returncode == 0
    path = project / ".pact" / "audit.jsonl"
    log = path.read_text(encoding="utf-8").splitlines()
    first = json.loads(log[1])
    assert first["type"] == "item_dispatched"
    # A second success of an item that is already done: no row allows it.
    done = next(json.loads(line) for line in log if '"item_succeeded"' in line)
    done["seq"] = len(log) + 1
    path.write_text("\n".join([*log, json.dumps(done)]) + "\n")
    (project / ".pact" / "state.json").unlink()
    res = pact("status", str(project))
    assert res.returncode == 2
    assert "item_succeeded" in res.stderr and done["component_id"] in res.stderr
    assert "from done" in res.stderr and "Traceback" not in res.stderr
