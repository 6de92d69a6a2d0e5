"""Bad options and variables of the fleet's commands (``worker``, ``scheduler``, ``runs``,
``mcp --http``): refused at the edge with exit code 2 and one line that names them,
before anything starts, connects or is written.

Nothing here needs a Redis: the broker URL names a port where nothing listens, and every
refusal comes before the first connection. ``pact worker`` runs in a subprocess (a
worker that is not refused would start, and its supervisor would restart it forever),
the other commands through click's runner.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import Result
from typer.testing import CliRunner

from pact_workers.errors import InputError
from pact_workers.fleet.connection import check_redis_url
from scheduler.cli import app
from scheduler.commands.fleet import worker_argv

NOBODY = "redis://127.0.0.1:1/0"  # nothing listens there
#: Long enough for a refusal; a worker that is not refused runs (or restarts) forever.
REFUSAL_S = 30


def pact(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``pact ARGS`` in a new process, as a user runs it; a command that has not ended
    after :data:`REFUSAL_S` was not refused: it is killed with the processes it started
    (a supervisor's worker, a worker's pool), and the test fails."""
    argv = [sys.executable, "-m", "scheduler.cli", *args]
    with subprocess.Popen(
        argv,
        env={**os.environ, **(env or {})},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    ) as proc:
        try:
            stdout, stderr = proc.communicate(timeout=REFUSAL_S)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            _, stderr = proc.communicate()
            pytest.fail(f"`pact {' '.join(args)}` was not refused: it ran on ({stderr[-2000:]})")
    return subprocess.CompletedProcess(argv, proc.returncode, stdout, stderr)


def cli(*args: str, env: dict[str, str] | None = None) -> Result:
    return CliRunner().invoke(app, list(args), env=env)


def scheduler(runs: Path | str, *options: str) -> Result:
    """``pact scheduler`` against a Redis where nothing listens, driving ``runs``."""
    return cli("scheduler", "--broker", NOBODY, "--runs-dir", str(runs), *options)


def one_line(text: str) -> str:
    return " ".join(text.split())


def assert_refused(code: int, stderr: str, *named: str) -> None:
    message = one_line(stderr)
    assert code == 2, stderr
    assert "Traceback" not in stderr and "internal error" not in stderr, stderr
    for name in named:
        assert name in message, stderr


@pytest.fixture
def port_in_use() -> Iterator[int]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield int(sock.getsockname()[1])


# -- pact worker ---------------------------------------------------------------------------


@pytest.mark.parametrize("supervise", ["--no-supervise", "--supervise"])
def test_a_worker_with_an_unknown_log_level_is_refused_before_it_starts(supervise: str) -> None:
    done = pact("worker", "--broker", NOBODY, "--loglevel", "zzz", supervise)
    assert_refused(done.returncode, done.stderr, "--loglevel", "'zzz'", "DEBUG", "CRITICAL")
    assert "restarting" not in done.stderr  # the supervisor started no child


def test_a_worker_with_an_unknown_log_level_in_its_variable_is_refused_before_it_starts() -> None:
    done = pact("worker", "--broker", NOBODY, env={"PACT_LOGLEVEL": "zzz"})
    assert_refused(done.returncode, done.stderr, "PACT_LOGLEVEL", "'zzz'", "WARNING")
    assert "restarting" not in done.stderr


def test_a_worker_log_level_is_taken_in_any_case(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PACT_BROKER_URL", NOBODY)  # worker_argv sets it; restored after
    argv = worker_argv(
        broker_url=NOBODY, roles="integrator", concurrency=1, pool="solo", loglevel="debug"
    )
    assert argv[argv.index("--loglevel") + 1] == "DEBUG"


def test_a_worker_with_more_processes_than_the_bound_is_refused_before_it_starts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    done = pact(
        "worker", "--broker", NOBODY, "--concurrency", "99999999999999999999", "--no-supervise"
    )
    assert_refused(done.returncode, done.stderr, "--concurrency", "1024", "99999999999999999999")
    monkeypatch.setenv("PACT_BROKER_URL", NOBODY)
    options = {"broker_url": NOBODY, "roles": "integrator", "pool": "solo", "loglevel": "INFO"}
    with pytest.raises(InputError, match="between 1 and 1024 processes, got 1025"):
        worker_argv(concurrency=1025, **options)
    assert "1024" in worker_argv(concurrency=1024, **options)


@pytest.mark.parametrize("value", ["abc", "0", "-1", "nan", "inf"])
def test_a_worker_whose_heartbeat_interval_is_not_a_positive_number_is_refused_at_start(
    value: str,
) -> None:
    done = pact("worker", "--broker", NOBODY, env={"PACT_WORKER_HEARTBEAT_S": value})
    assert_refused(done.returncode, done.stderr, f"PACT_WORKER_HEARTBEAT_S='{value}'", "than 0")
    assert "restarting" not in done.stderr


def test_a_heartbeat_interval_may_be_a_fraction_of_a_second() -> None:
    from pact_workers.tasks import heartbeat_interval_s

    assert heartbeat_interval_s({"PACT_WORKER_HEARTBEAT_S": " 0.5 "}) == 0.5
    assert heartbeat_interval_s({}) == 5.0


# -- pact scheduler ------------------------------------------------------------------------


@pytest.mark.parametrize("port", ["-1", "70000"])
def test_a_scheduler_metrics_port_outside_the_tcp_range_is_refused(
    port: str, tmp_path: Path
) -> None:
    runs = tmp_path / "runs"
    res = scheduler(runs, "--metrics-port", port)
    assert_refused(res.exit_code, res.stderr, "--metrics-port")
    assert not runs.exists()


def test_a_scheduler_metrics_address_that_does_not_resolve_is_refused(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    res = scheduler(runs, "--metrics-addr", "zzz.invalid", "--metrics-port", "19188")
    assert_refused(res.exit_code, res.stderr, "--metrics-addr 'zzz.invalid'", "--metrics-port")
    assert not runs.exists()


def test_a_scheduler_metrics_port_in_use_is_refused(port_in_use: int, tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    res = scheduler(runs, "--metrics-port", str(port_in_use))
    assert_refused(res.exit_code, res.stderr, f"--metrics-port {port_in_use}", "in use")
    assert not runs.exists()


@pytest.mark.parametrize("where", ["/proc/pact-runs", "{file}/runs"])
def test_a_scheduler_runs_dir_that_cannot_hold_runs_is_refused_before_it_starts(
    where: str, tmp_path: Path
) -> None:
    (tmp_path / "afile").write_text("not a directory")
    runs = where.format(file=tmp_path / "afile")
    res = scheduler(runs)
    assert_refused(res.exit_code, res.stderr, f"--runs-dir {runs}")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["afile"]
    assert not Path("/proc/pact-runs").exists()


# -- broker URLs (pact runs; every fleet command checks them alike) ------------------------


@pytest.mark.parametrize(
    ("url", "named"),
    [
        (f"{NOBODY}?socket_timeout=abc", "socket_timeout"),
        (f"{NOBODY}?ssl_cert_reqs=zzz", "'ssl_cert_reqs'"),
        ("rediss://127.0.0.1:1/0?ssl_cert_reqs=zzz", "zzz"),
        ("redis://127.0.0.1:1/99999999999999999999", "99999999999999999999"),
        ("redis://127.0.0.1:1/2147483648", "2147483648"),
        ("unix:///tmp/no-redis.sock?db=2147483648", "2147483648"),
    ],
)
@pytest.mark.parametrize("given", ["--broker", "PACT_BROKER_URL"])
def test_a_broker_url_redis_cannot_read_is_an_invalid_url(url: str, named: str, given: str) -> None:
    if given == "--broker":
        res = cli("runs", "--broker", url)
    else:
        res = cli("runs", env={"PACT_BROKER_URL": url})
    assert_refused(res.exit_code, res.stderr, "invalid Redis URL", named)


def test_a_broker_url_is_checked_as_redis_reads_it() -> None:
    with pytest.raises(InputError, match="invalid Redis URL .*'max_connections'"):
        check_redis_url(f"{NOBODY}?max_connections=many")
    for url in (
        f"{NOBODY}?socket_timeout=5&health_check_interval=2",
        "rediss://127.0.0.1:1/0?ssl_cert_reqs=required",
        "redis://127.0.0.1:1/2147483647",
        "unix:///tmp/no-redis.sock?db=3",
    ):
        assert check_redis_url(url) == url


# -- pact mcp --http -----------------------------------------------------------------------


def test_an_mcp_http_host_that_does_not_resolve_is_refused(tmp_path: Path) -> None:
    res = cli(
        "mcp",
        "--project",
        str(tmp_path),
        "--http",
        "18765",
        "--host",
        "zzz.invalid",
        env={"PACT_MCP_TOKEN": "tok"},
    )
    assert_refused(res.exit_code, res.stderr, "--host 'zzz.invalid'", "--http 18765")


def test_an_mcp_http_port_in_use_is_refused(port_in_use: int, tmp_path: Path) -> None:
    res = cli(
        "mcp", "--project", str(tmp_path), "--http", str(port_in_use), env={"PACT_MCP_TOKEN": "t"}
    )
    assert_refused(res.exit_code, res.stderr, f"--http {port_in_use}", "in use")
