"""The item lifecycle through the CLI: what workers report (running, verifying) is in
the log and in ``pact status``; a log with an illegal move is refused, naming it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.acceptance.test_cli import pact


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One demo run for the module (each test works on its own copy)."""
    project = tmp_path_factory.mktemp("lifecycle") / "demo"
    res = pact("demo", str(project))
    assert res.returncode == 0, res.stderr
    return project


@pytest.fixture
def demo(demo_run: Path, tmp_path: Path) -> Path:
    project = tmp_path / "demo"
    shutil.copytree(demo_run, project, symlinks=True)
    return project


def events(project: Path) -> list[dict[str, object]]:
    lines = (project / ".pact" / "audit.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def test_every_verified_implementation_was_reported_running_then_verifying(demo: Path) -> None:
    log = events(demo)
    for done in (e for e in log if e["type"] == "item_succeeded" and e["phase"] == "implement"):
        key = (done["component_id"], done["phase"], done["attempt"])
        seen = [
            e["status"]
            for e in log
            if e["type"] == "item_progress" and (e["component_id"], e["phase"], e["attempt"]) == key
        ]
        assert seen == ["running", "verifying"], (key, seen)


def test_status_shows_an_attempt_a_worker_reports_as_verifying(demo: Path) -> None:
    project = demo
    log = (project / ".pact" / "audit.jsonl").read_text(encoding="utf-8").splitlines()
    # Cut the log right after an implementation was reported verifying: what a status
    # taken at that moment shows.
    at = next(i for i, line in enumerate(log) if '"status":"verifying"' in line)
    (project / ".pact" / "audit.jsonl").write_text("\n".join(log[: at + 1]) + "\n")
    (project / ".pact" / "state.json").unlink()
    status = json.loads(pact("status", str(project), "--json").stdout)
    assert status["items"].get("verifying") == 1


def test_a_log_with_an_illegal_move_is_refused_with_the_event_and_item_named(demo: Path) -> None:
    project = demo
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


def test_status_counts_as_ready_what_waits_for_nothing_not_done(demo: Path) -> None:
    from pact_workers.models.tree import DecompositionTree

    project = demo
    log = (project / ".pact" / "audit.jsonl").read_text(encoding="utf-8").splitlines()
    started = json.loads(log[0])
    assert started["type"] == "run_started"
    tree = DecompositionTree.model_validate(started["tree"])
    # Right after the start only contracts of components that depend on no other are
    # ready; every other item waits for something (pending).
    free = [c for c in tree.nodes if not tree.internal_dependencies(c)]
    (project / ".pact" / "audit.jsonl").write_text(log[0] + "\n")
    (project / ".pact" / "state.json").unlink()
    status = json.loads(pact("status", str(project), "--json").stdout)
    assert status["items"].get("ready") == len(free) > 0
    assert status["items"].get("pending") == sum(status["items"].values()) - len(free)
    # Once the first contract is done, its tests are ready too (and it is not).
    at = next(
        i
        for i, line in enumerate(log)
        if '"type":"item_succeeded"' in line and '"phase":"contract"' in line
    )
    (project / ".pact" / "audit.jsonl").write_text("\n".join(log[: at + 1]) + "\n")
    done = json.loads(log[at])["component_id"]
    res = pact("status", str(project), "--json")
    assert res.returncode == 0, res.stderr
    items = json.loads(res.stdout)["items"]
    assert items.get("done") == 1 and items.get("ready", 0) >= 1
    human = pact("status", str(project))
    assert human.returncode == 0 and "ready" in human.stdout, (done, human.stdout)


def test_status_pauses_the_collector_only_while_it_runs(demo: Path) -> None:
    """``pact status`` reads a large state with the cyclic collector off; a caller in
    the same process (the MCP server, a test) gets it back on, with the same answer."""
    import gc

    from typer.testing import CliRunner

    from scheduler.cli import app

    assert gc.isenabled()
    res = CliRunner().invoke(app, ["status", str(demo), "--json"])
    assert res.exit_code == 0, res.output
    assert gc.isenabled()
    assert json.loads(res.stdout) == json.loads(pact("status", str(demo), "--json").stdout)
