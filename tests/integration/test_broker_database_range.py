"""A broker URL naming a database the server does not have: the server says so, and
the message says the database number is out of the server's range."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytestmark = [pytest.mark.redis, pytest.mark.timeout(120)]


def test_a_database_the_server_does_not_have_is_named_out_of_its_range(redis_url: str) -> None:
    beyond = redis_url.rsplit("/", 1)[0] + "/99999"  # the server has 16 (0 to 15)
    done = subprocess.run(
        [sys.executable, "-m", "scheduler.cli", "runs", "--broker", beyond],
        capture_output=True,
        text=True,
        timeout=60,
    )
    message = " ".join(done.stderr.split())
    assert done.returncode == 1, done.stderr
    assert "database number 99999 is out of the server's range" in message, done.stderr
    assert "Traceback" not in done.stderr
