"""The bundled example with every verification in Docker sandboxes: on the local
executor and on the fleet."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pact_workers.sandbox.docker import LABEL, LABEL_VALUE, DockerSandbox
from scheduler.project import ProjectDir
from scheduler.rebuild import rebuild_state
from scheduler.state import RunStatus
from tests.acceptance.test_crash import check_applied_once
from tests.conftest import DOCKER_GROUP
from tests.integration.fleet import Fleet, pact_argv
from tests.integration.test_sandbox_contract import docker_sandbox

pytestmark = DOCKER_GROUP


@pytest.fixture(scope="module")
def docker_session() -> Iterator[tuple[Any, DockerSandbox]]:
    with docker_sandbox() as pair:
        yield pair


def sandboxes_left(client: Any) -> list[Any]:
    found: list[Any] = client.containers.list(all=True, filters={"label": f"{LABEL}={LABEL_VALUE}"})
    return found


ALL_ROLES = ["contract_author", "test_author", "code_author", "integrator"]


def _completed(project: Path) -> None:
    state = rebuild_state(project)
    assert state.status is RunStatus.COMPLETED
    assert state.sandbox == "docker"
    check_applied_once(project)
    results = [
        i.test_results for i in state.items.values() if i.phase.value in {"implement", "integrate"}
    ]
    assert results and all(r is not None and r.all_passed for r in results)


@pytest.mark.slow
def test_example_runs_in_docker_sandboxes_on_the_local_executor(
    docker_session: tuple[Any, DockerSandbox], example: Path, tmp_path: Path
) -> None:
    client, _ = docker_session
    project = tmp_path / "project"
    res = subprocess.run(
        pact_argv(
            "run",
            str(example / "tree.json"),
            "--project",
            str(project),
            "--replay-dir",
            str(example / "replay"),
            "--sandbox",
            "docker",
        ),
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert res.returncode == 0, res.stdout + res.stderr
    _completed(project)
    assert ProjectDir(project).implementations_dir.is_dir()
    assert sandboxes_left(client) == []


@pytest.mark.slow
def test_example_runs_in_docker_sandboxes_on_the_fleet(
    docker_session: tuple[Any, DockerSandbox], redis_url: str, example: Path, tmp_path: Path
) -> None:
    client, _ = docker_session
    project = tmp_path / "project"
    with Fleet(redis_url, tmp_path / "logs") as fleet:
        fleet.worker("w", roles=ALL_ROLES, concurrency=3)
        run = fleet.pact(
            "run",
            str(example / "tree.json"),
            "--project",
            str(project),
            "--replay-dir",
            str(example / "replay"),
            "--sandbox",
            "docker",
            "--executor",
            "celery",
            "--broker",
            redis_url,
            name="run",
        )
        assert run.wait(900) == 0, fleet.logs()
    _completed(project)
    assert sandboxes_left(client) == []
