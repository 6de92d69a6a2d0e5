"""``pact verify --sandbox docker``: the same recorded counts reproduced in containers."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pact_workers.sandbox.docker import LABEL, LABEL_VALUE, DockerSandbox
from tests.conftest import DOCKER_GROUP
from tests.integration.fleet import pact_argv
from tests.integration.test_sandbox_contract import docker_sandbox
from tests.pactlayout import FAILING, FAILING_COUNTS, pact_project_from_example

pytestmark = DOCKER_GROUP


@pytest.fixture(scope="module")
def docker_session() -> Iterator[tuple[Any, DockerSandbox]]:
    with docker_sandbox() as pair:
        yield pair


@pytest.mark.slow
def test_pact_verify_in_docker_reproduces_every_recorded_count_and_exits_1_on_an_edit(
    docker_session: tuple[Any, DockerSandbox], example: Path, tmp_path: Path
) -> None:
    client, _ = docker_session
    root = pact_project_from_example(example, tmp_path / "pact-project")
    argv = pact_argv("verify", str(root), "--sandbox", "docker", "--json")
    res = subprocess.run(argv, capture_output=True, text=True, timeout=900)
    assert res.returncode == 0, res.stdout + res.stderr
    rows = {row["component"]: row for row in json.loads(res.stdout)}
    assert len(rows) == 10 and all(row["match"] for row in rows.values())
    assert rows[FAILING]["reproduced"] == FAILING_COUNTS
    results = root / ".pact" / "implementations" / FAILING / "test_results.json"
    results.write_text(json.dumps({**FAILING_COUNTS, "passed": 12, "failed": 1}))
    res = subprocess.run(argv, capture_output=True, text=True, timeout=900)
    assert res.returncode == 1, res.stdout + res.stderr
    differ = [row["component"] for row in json.loads(res.stdout) if not row["match"]]
    assert differ == [FAILING]
    left = client.containers.list(all=True, filters={"label": f"{LABEL}={LABEL_VALUE}"})
    assert left == []
