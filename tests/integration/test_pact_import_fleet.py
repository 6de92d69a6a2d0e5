"""``pact import --executor celery``: a Pact project's artifacts re-verified by the
fleet's workers (they read them from Redis), the failing one authored by an agent."""

from __future__ import annotations

from pathlib import Path

import pytest

from scheduler.rebuild import rebuild_state
from scheduler.state import RunStatus
from tests.integration.fleet import Fleet
from tests.integration.test_docker_runs import ALL_ROLES
from tests.pactlayout import FAILING, pact_project_from_example

pytestmark = pytest.mark.slow


def test_a_pact_project_imported_on_the_fleet_is_reverified_by_its_workers(
    redis_url: str, example: Path, tmp_path: Path
) -> None:
    pact_root = pact_project_from_example(example, tmp_path / "pact-project")
    project = tmp_path / "run"
    with Fleet(redis_url, tmp_path / "logs") as fleet:
        fleet.worker("w", roles=ALL_ROLES, concurrency=3)
        run = fleet.pact(
            "import",
            str(pact_root),
            "--project",
            str(project),
            "--replay-dir",
            str(example / "replay"),
            "--executor",
            "celery",
            "--broker",
            redis_url,
            name="import",
        )
        assert fleet.wait(run, 300) == 0, fleet.logs()
    state = rebuild_state(project)
    assert state.status is RunStatus.COMPLETED
    caches = {key: item.cache for key, item in state.items.items()}
    assert caches.pop(f"{FAILING}/implement") == "dropped"
    assert set(caches.values()) == {"hit"} and len(caches) == 29
