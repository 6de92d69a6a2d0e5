"""Shared fixtures: real data paths, the bundled example, and service checks.

A test that needs Redis or Docker uses ``require_service``: it skips with the
reason when the service is missing, and fails instead when
``PACT_REQUIRE_SERVICES=1`` (CI sets it).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from scheduler.commands import example_dir

REPO = Path(__file__).resolve().parent.parent
DATA = REPO / "tests" / "data"
#: Real Pact documents (MIT-licensed, see the READMEs there): the stigmergy tree and
#: contracts, and pact-bench run records.
SHARED_DATA = DATA / "real"


def require_service(name: str, reason: str) -> None:
    if os.environ.get("PACT_REQUIRE_SERVICES") == "1":
        pytest.fail(f"{name} is required (PACT_REQUIRE_SERVICES=1) but {reason}")
    pytest.skip(f"{name} not available: {reason}")


def shared_data(*parts: str) -> Path:
    path = SHARED_DATA.joinpath(*parts)
    assert path.exists(), f"{path} is missing from the repository"
    return path


@pytest.fixture(autouse=True, scope="session")
def _no_shared_action_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Runs of the tests (in process or in subprocesses) never use the user's action
    cache: each session has one of its own, and each test (below) one of its own."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PACT_CACHE_DIR", str(tmp_path_factory.mktemp("action-cache")))
        yield


@pytest.fixture(autouse=True)
def _own_action_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PACT_CACHE_DIR", str(tmp_path_factory.mktemp("action-cache")))
        yield


@pytest.fixture(scope="session")
def example() -> Iterator[Path]:
    with example_dir() as path:
        yield path


@pytest.fixture
def replay_copy(example: Path, tmp_path: Path) -> Path:
    """A private copy of the example's replay directory that a test may edit."""
    dest = tmp_path / "replay"
    shutil.copytree(example / "replay", dest)
    return dest


#: The xdist group of every test that starts Docker sandboxes or counts them: those
#: tests assert that no sandbox container is left, which another test's running
#: sandboxes would break, so under ``pytest -n`` they run one after another.
DOCKER_GROUP = pytest.mark.xdist_group("docker")


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Under pytest-xdist (``--dist loadgroup``): the tests of a module that has
    module-scoped fixtures share one worker, which sets those fixtures up once.

    Tests already in a group keep it; any other test goes to whichever worker is free.
    """
    for item in items:
        if item.get_closest_marker("xdist_group") is not None:
            continue
        info = getattr(item, "_fixtureinfo", None)
        if info is None:
            continue
        if any(defs[-1].scope == "module" for defs in info.name2fixturedefs.values()):
            item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::", 1)[0]))
