"""A fleet run goes on over a project artifact that reads corrupt: the scheduler
writes its local copy again from Redis's. The run pauses for review on the fleet,
a byte of the awaiting attempt's source file flips in the project's artifacts, and
``pact approve --executor celery`` promotes the right bytes, mends the copy and
completes the run. A real redis-server and real Celery worker processes."""

from __future__ import annotations

from pathlib import Path

import pytest

from pact_workers.artifacts import digest_bytes
from scheduler.launch import load_state
from scheduler.project import ProjectDir
from tests.integration.fleet import Fleet
from tests.integration.test_fleet_faults import run_args
from tests.integration.test_gates_fleet import gated_project
from tests.integration.test_service import ALL_ROLES
from tests.unit.test_tiered_store import flip_first_byte

pytestmark = [pytest.mark.slow, pytest.mark.redis]

SOURCE = "src/ast_nodes.py"


@pytest.mark.timeout(400)
def test_a_fleet_run_mends_a_corrupt_project_artifact_from_redis_and_completes(
    redis_url: str, example: Path, tmp_path: Path
) -> None:
    project_dir = gated_project(tmp_path / "project")
    project = ProjectDir(project_dir)
    with Fleet(redis_url, tmp_path / "logs") as fleet:
        fleet.worker("w", roles=ALL_ROLES, concurrency=4)
        run = fleet.pact(*run_args(example, project_dir, redis_url), name="run")
        assert fleet.wait(run, 300) == 3, fleet.logs(run)  # awaiting review
        item = load_state(project)[0].item("ast_nodes", "implement")
        held = item.gates.review
        assert item.status.value == "awaiting_review" and held is not None
        store = project.store()
        digest = store.get_manifest(held.output)[SOURCE]
        source = store.get_bundle(held.output)[SOURCE]
        path = flip_first_byte(project.artifacts_dir, digest)

        approve = fleet.pact(
            "approve",
            str(project_dir),
            "ast_nodes",
            "--by",
            "erin",
            "--executor",
            "celery",
            "--broker",
            redis_url,
            name="approve",
        )
        assert fleet.wait(approve, 300) == 0, fleet.logs(approve)
    assert "corrupt on disk" in fleet.logs(approve)  # said, not hidden
    state = load_state(project)[0]
    assert state.item("ast_nodes", "implement").status.value == "done"
    assert all(i.status.value == "done" for i in state.items.values())
    assert (project.implementations_dir / "ast_nodes" / SOURCE).read_bytes() == source
    assert digest_bytes(path.read_bytes()) == digest
