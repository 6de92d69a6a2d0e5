"""Real services for integration tests: ``redis-server`` processes on free ports.

``redis_server`` is one server for the session (``redis_url`` flushes it before each
test); ``private_redis`` is a server of a test's own, for tests that stop, kill or
restart it. Servers persist with an append-only file fsynced on every write, so data
survives a restart (even a SIGKILL) on the same directory. No server outlives the
session: fixtures stop theirs in teardown (also when a test fails), an atexit hook
kills any left over, and on Linux a server started on the main thread is killed by
the kernel when pytest itself dies.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import quote

import pytest

from tests.conftest import require_service

#: How long a server gets to answer after it starts, and to exit after SIGTERM.
START_TIMEOUT_S = 15.0
STOP_TIMEOUT_S = 10.0

_RUNNING: set[RedisServer] = set()

_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    """In the child before exec: have Linux SIGKILL the server if pytest dies (even by
    SIGKILL, which no finalizer or atexit hook survives)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class RedisServer:
    """One ``redis-server`` process on 127.0.0.1 with an append-only file in ``directory``.

    Args:
        directory: the server's working directory (AOF, log, unix socket).
        password: if given, the server requires it (``--requirepass``).
        port: the TCP port; a free one by default. ``restart`` keeps it.
    """

    def __init__(
        self, directory: Path, *, password: str | None = None, port: int | None = None
    ) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.password = password
        self.port = port if port is not None else free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        auth = f":{quote(self.password, safe='')}@" if self.password else ""
        return f"redis://{auth}127.0.0.1:{self.port}/0"

    @property
    def unix_socket(self) -> Path:
        return self.directory / "redis.sock"

    @property
    def log(self) -> Path:
        return self.directory / "redis.log"

    def start(self) -> None:
        """Start the server and wait until it answers (its AOF loaded)."""
        assert self.proc is None, "already running"
        argv = [
            "redis-server",
            "--port", str(self.port),
            "--bind", "127.0.0.1",
            "--dir", str(self.directory),
            "--logfile", str(self.log),
            "--appendonly", "yes",
            "--appendfsync", "always",
            "--save", "",
            "--daemonize", "no",
            "--maxmemory-policy", "noeviction",
        ]  # fmt: skip
        if len(str(self.unix_socket)) < 100:  # the sun_path limit is 108 bytes
            argv += ["--unixsocket", str(self.unix_socket), "--unixsocketperm", "700"]
        if self.password:
            argv += ["--requirepass", self.password]
        # The death signal follows the thread that forks, not the process: only servers
        # started on the main thread (which lives as long as pytest) get it.
        on_main = threading.current_thread() is threading.main_thread()
        self.proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            preexec_fn=_die_with_parent if sys.platform == "linux" and on_main else None,
        )
        _RUNNING.add(self)
        try:
            self._wait_until_ready()
        except BaseException:
            self.kill()
            raise

    def _wait_until_ready(self) -> None:
        assert self.proc is not None
        deadline = time.monotonic() + START_TIMEOUT_S
        reply = b""
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"redis-server on port {self.port} exited with {self.proc.returncode}: "
                    f"{self._log_tail()}"
                )
            reply = self._ping()
            # Without the password the server still answers (NOAUTH): it is up.
            if reply.startswith((b"+PONG", b"-NOAUTH")):
                return
            time.sleep(0.02)
        raise RuntimeError(
            f"redis-server on port {self.port} did not answer within {START_TIMEOUT_S} s "
            f"(last reply {reply!r}): {self._log_tail()}"
        )

    def _ping(self) -> bytes:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1.0) as sock:
                sock.sendall(b"PING\r\n")
                return sock.recv(128)
        except OSError:
            return b""

    def _log_tail(self) -> str:
        try:
            return " | ".join(self.log.read_text(errors="replace").splitlines()[-5:])
        except OSError:
            return "(no log)"

    def stop(self) -> None:
        """SIGTERM (Redis flushes the AOF and exits), then SIGKILL if it hangs."""
        self._end(signal.SIGTERM)

    def kill(self) -> None:
        """SIGKILL, as a crash or an OOM kill would."""
        self._end(signal.SIGKILL)

    def restart(self) -> None:
        """Stop and start again on the same port and directory (the AOF survives)."""
        self.stop()
        self.start()

    def _end(self, sig: signal.Signals) -> None:
        proc, self.proc = self.proc, None
        _RUNNING.discard(self)
        if proc is None:
            return
        if proc.poll() is None:
            proc.send_signal(sig)
            try:
                proc.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        # A port just released: wait until nothing answers on it before returning.
        deadline = time.monotonic() + STOP_TIMEOUT_S
        while self._ping() and time.monotonic() < deadline:
            time.sleep(0.02)


@atexit.register
def _kill_leftovers() -> None:
    for server in list(_RUNNING):
        with contextlib.suppress(Exception):
            server.kill()


def _require_redis_server() -> None:
    if shutil.which("redis-server") is None:
        require_service("redis-server", "the redis-server binary is not on PATH")


@contextlib.contextmanager
def running(server: RedisServer) -> Iterator[RedisServer]:
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """One real redis-server for the whole session."""
    _require_redis_server()
    with running(RedisServer(tmp_path_factory.mktemp("redis"))) as server:
        yield server


def _flushall(server: RedisServer) -> None:
    with socket.create_connection(("127.0.0.1", server.port), timeout=5.0) as sock:
        sock.sendall(b"FLUSHALL\r\n")
        reply = sock.recv(128)
    assert reply.startswith(b"+OK"), reply


@pytest.fixture
def redis_url(redis_server: RedisServer) -> str:
    """The session server's URL, its data flushed first."""
    if redis_server.proc is None:  # a test stopped it: bring it back
        redis_server.start()
    _flushall(redis_server)
    return redis_server.url


@pytest.fixture
def start_redis(tmp_path: Path) -> Iterator[Callable[..., RedisServer]]:
    """Start servers of this test's own (``start_redis(password="...")``); all are
    stopped at teardown."""
    _require_redis_server()
    servers: list[RedisServer] = []

    def start(*, password: str | None = None) -> RedisServer:
        server = RedisServer(tmp_path / f"redis-{len(servers)}", password=password)
        servers.append(server)
        server.start()
        return server

    try:
        yield start
    finally:
        for server in servers:
            server.stop()


@pytest.fixture
def private_redis(start_redis: Callable[..., RedisServer]) -> RedisServer:
    """A redis-server of this test's own, which it may stop, kill and restart."""
    return start_redis()
