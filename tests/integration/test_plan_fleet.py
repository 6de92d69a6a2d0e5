"""``pact plan --executor celery``: the interviewer and the decomposer answered by workers
through ``pact.interviewer`` and ``pact.decomposer``, like every other role's work."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.integration.fleet import Fleet

pytestmark = pytest.mark.slow


def test_pact_plan_on_the_fleet_is_answered_by_the_planning_roles_workers(
    redis_url: str, example: Path, tmp_path: Path
) -> None:
    replay = tmp_path / "replay"
    shutil.copytree(example / "replay", replay)
    tree = json.loads((replay / "plan" / "tree.json").read_text())
    (replay / "plan" / "tree-1.json").write_text(json.dumps({**tree, "root_id": "nowhere"}))
    project = tmp_path / "project"
    with Fleet(redis_url, tmp_path / "logs") as fleet:
        planner = fleet.worker("planner", roles=["interviewer", "decomposer"], concurrency=1)
        plan = fleet.pact(
            "plan",
            str(example / "task.md"),
            "--project",
            str(project),
            "--replay-dir",
            str(replay),
            "--approve",
            "--executor",
            "celery",
            "--broker",
            redis_url,
            name="plan",
        )
        assert fleet.wait(plan, 120) == 0, fleet.logs()
    # The worker took every call from its role's queue (what Flower would show too).
    served = planner.log.read_text()
    assert served.count("'interviewer answered'") == 1
    assert served.count("'decomposer answered'") == 2
    written = json.loads((project / "decomposition" / "tree.json").read_text())
    assert written["root_id"] == "calculator"  # the invalid first tree was sent back
    doc = json.loads((project / "decomposition" / "interview.json").read_text())
    assert len(doc["answer_log"]) == 6
    assert doc["planning_usage"]["decomposer"]["cost_usd"] == pytest.approx(2 * 0.0405)


def test_pact_plan_on_the_fleet_says_which_queue_no_worker_serves(
    redis_url: str, example: Path, tmp_path: Path
) -> None:
    project = tmp_path / "project"
    with Fleet(redis_url, tmp_path / "logs") as fleet:
        plan = fleet.pact(
            "plan",
            str(example / "task.md"),
            "--project",
            str(project),
            "--replay-dir",
            str(example / "replay"),
            "--approve",
            "--executor",
            "celery",
            "--broker",
            redis_url,
            "--timeout",
            "2",
            name="plan",
        )
        assert fleet.wait(plan, 60) == 1, fleet.logs()
        said = plan.describe()
    assert "no answer from the interviewer within 2 s" in said and "pact.interviewer" in said
    assert not (project / "decomposition").exists()
