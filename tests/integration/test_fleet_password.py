"""A password-protected Redis: the URL says so, and everything works through it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.integration.conftest import RedisServer
from tests.integration.fleet import Fleet

PASSWORD = "p@ss:w0rd/x"  # characters that must be percent-encoded in a URL


@pytest.mark.slow
def test_the_example_runs_through_a_password_protected_redis(
    start_redis: Callable[..., RedisServer], example: Path, tmp_path: Path
) -> None:
    server = start_redis(password=PASSWORD)
    assert PASSWORD not in server.url and "%40" in server.url  # percent-encoded
    with Fleet(server.url, tmp_path / "logs") as fleet:
        fleet.worker(
            "w",
            roles=["contract_author", "test_author", "code_author", "integrator"],
            concurrency=3,
        )
        run = fleet.pact(
            "run",
            str(example / "tree.json"),
            "--project",
            str(tmp_path / "p"),
            "--replay-dir",
            str(example / "replay"),
            "--executor",
            "celery",
            "--broker",
            server.url,
            name="run",
        )
        assert run.wait(300) == 0, fleet.logs()
        wrong = server.url.replace("%40", "%41", 1)
        denied = fleet.pact(
            "run",
            str(example / "tree.json"),
            "--project",
            str(tmp_path / "q"),
            "--replay-dir",
            str(example / "replay"),
            "--executor",
            "celery",
            "--broker",
            wrong,
            name="denied",
        )
        assert denied.wait(120) != 0
        assert PASSWORD not in (tmp_path / "logs" / "denied.log").read_text()
