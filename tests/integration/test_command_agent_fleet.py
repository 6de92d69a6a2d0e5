"""Acceptance: a command-line coding agent completes the bundled example through the
fleet, its every run and every verification in Docker sandboxes.

The agent is ``tests/agents/fake_coding_agent.py``, a real program that reads its
workspace and writes files; it and its knowledge reach each sandbox through the command
backend's ``files_dir``. Each Python file it writes records where it ran: the test
checks that every agent run had a network (and ran in a container's ``/workspace``),
and the suites it writes carry a probe test that fails when the harness's verification
sandbox has one, so a completed run also shows that verification ran without network.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from pact_workers.models.work import Phase
from pact_workers.sandbox.docker import DockerSandbox
from pact_workers.verify import count_tests
from scheduler.project import ProjectDir
from scheduler.rebuild import rebuild_state
from scheduler.state import RunStatus
from tests.agents import fake_agent_argv, stage_agent_files
from tests.agents.fake_coding_agent import EVIDENCE_PREFIX, PROBE_TEST
from tests.conftest import DOCKER_GROUP
from tests.integration.fleet import Fleet
from tests.integration.test_docker_runs import ALL_ROLES, sandboxes_left
from tests.integration.test_sandbox_contract import docker_sandbox

pytestmark = DOCKER_GROUP

#: The AgentConfig field that names the directory copied into every agent workspace.
FILES_FIELD = "files_dir"
RUN_TIMEOUT_S = 800
WORKER_CONCURRENCY = 3


@pytest.fixture(scope="module")
def docker_session() -> Iterator[tuple[Any, DockerSandbox]]:
    with docker_sandbox() as pair:
        yield pair


def evidence(path: Path) -> dict[str, str]:
    """The ``key=value`` fields of the fake agent's first-line comment in ``path``."""
    first = path.read_text().splitlines()[0]
    assert first.startswith(EVIDENCE_PREFIX), f"{path} was not written by the fake agent"
    return dict(field.split("=", 1) for field in first[len(EVIDENCE_PREFIX) :].split())


@pytest.mark.slow
@pytest.mark.timeout(RUN_TIMEOUT_S + 100)
def test_a_command_agent_completes_the_example_through_the_fleet_in_docker_sandboxes(
    docker_session: tuple[Any, DockerSandbox],
    redis_url: str,
    example: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    client, _ = docker_session
    files_dir = stage_agent_files(example / "replay", tmp_path / "agent-files")
    project = tmp_path / "project"
    project.mkdir()
    agent = {
        "backend": "command",
        "argv": fake_agent_argv(probe_network=True),
        FILES_FIELD: str(files_dir),
        "timeout_s": 300,
    }
    (project / "pact.yaml").write_text(yaml.safe_dump({"agents": {"default": agent}}))
    # The worker runs the agent in the run's sandbox (docker), whatever PACT_SANDBOX says.
    monkeypatch.setenv("PACT_SANDBOX", "local")
    with Fleet(redis_url, tmp_path / "logs") as fleet:
        fleet.worker("w", roles=ALL_ROLES, concurrency=WORKER_CONCURRENCY)
        run = fleet.run(example / "tree.json", project, "--agent", "command", "--sandbox", "docker")
        assert fleet.wait(run, RUN_TIMEOUT_S) == 0, fleet.logs()

    state = rebuild_state(project)
    assert state.status is RunStatus.COMPLETED
    assert (state.agent, state.sandbox) == ("command", "docker")
    assert state.usage.input_tokens == 0  # a CLI agent reports no tokens
    components = json.loads((example / "tree.json").read_text())["nodes"]
    dirs = ProjectDir(project)
    for cid, node in components.items():
        role = "integrator" if node["children"] else "code_author"
        final = Phase.INTEGRATE if node["children"] else Phase.IMPLEMENT
        item = state.item(cid, final)
        results = item.test_results
        assert results is not None and results.all_passed, (cid, results)
        tests_dir = dirs.contracts_dir / cid / "tests"
        known = count_tests((tests_dir / "contract_test.py").read_text())
        # The contract tests and the probe ran, and passed: verification had no network.
        assert results.total == known + 1, (cid, results)
        assert (tests_dir.parent / PROBE_TEST).is_file()
        for path, wrote in [
            (dirs.implementations_dir / cid / "src" / f"{cid}.py", role),
            (tests_dir / "contract_test.py", "test_author"),
        ]:
            found = evidence(path)
            # Written by the fake agent for this component, in a container, with network.
            assert (found["role"], found["component"]) == (wrote, cid)
            assert (found["network"], found["workspace"]) == ("on", "/workspace")
    assert sandboxes_left(client) == []
