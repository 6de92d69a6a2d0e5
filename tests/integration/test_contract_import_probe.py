"""The import probe runs where the contract is verified: in Docker it checks the image,
not the machine the worker runs on."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from pact_workers.probes import importable_from_probe, probe_contract_imports, probe_imports
from pact_workers.sandbox import LocalSandbox
from pact_workers.sandbox.docker import DockerSandbox
from tests.conftest import DOCKER_GROUP
from tests.contracts import contract
from tests.integration.test_sandbox_contract import DOCKER_ENV, LOCAL_ENV, docker_sandbox

pytestmark = DOCKER_GROUP

#: Installed beside pact-fleet, absent from the sandbox image (python3 and pytest only).
ONLY_HERE = "typer"


@pytest.fixture(scope="module")
def docker_session() -> Iterator[tuple[Any, DockerSandbox]]:
    with docker_sandbox() as pair:
        yield pair


def test_the_local_sandbox_probes_the_worker_s_own_environment() -> None:
    found = probe_imports(
        LocalSandbox(), ["json", ONLY_HERE, "no_such_module_x"], environment=LOCAL_ENV, timeout_s=60
    )
    assert found == {"json": True, ONLY_HERE: True, "no_such_module_x": False}


def test_the_docker_sandbox_probes_the_image(docker_session: tuple[Any, DockerSandbox]) -> None:
    _, sandbox = docker_session
    probed = contract("user", dependencies=["pytest", ONLY_HERE, "json.decoder", "lexer"])
    results = probe_contract_imports(
        sandbox, probed, environment=DOCKER_ENV, timeout_s=120, known_ids={"lexer"}
    )
    assert results is not None and results.total == 3  # the known component is not probed
    assert importable_from_probe(probed, results) == {
        "pytest": True,
        ONLY_HERE: False,
        "json.decoder": True,
        "lexer": True,
    }
