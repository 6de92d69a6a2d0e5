"""The processes a benchmark starts beside itself — a private redis-server, Celery
workers — and the CPU time each spends.

On a machine of few cores the scheduler, the workers and Redis share them: a path's
wall time then follows the CPU all of them spend, and :func:`cpu_s` says which process
spent it (from ``/proc``, so on Linux; elsewhere it is ``None``).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


@dataclass(frozen=True)
class Broker:
    """A Redis to benchmark against: its URL, and its server's pid when it is ours."""

    url: str
    pid: int | None = None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def private_redis() -> Iterator[Broker]:
    """A redis-server of its own on a free port (append-only, fsynced every second, as
    a fleet's should be), stopped and removed at the end."""
    if shutil.which("redis-server") is None:
        raise SystemExit("redis-server not found: install it or pass --broker URL")
    port = free_port()
    tmp = tempfile.mkdtemp(prefix="bench-redis-")
    proc = subprocess.Popen(
        [
            "redis-server",
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--dir",
            tmp,
            "--save",
            "",
            "--appendonly",
            "yes",
            "--appendfsync",
            "everysec",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        for _ in range(100):
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.05)
        yield Broker(f"redis://127.0.0.1:{port}/0", proc.pid)
    finally:
        proc.terminate()
        proc.wait(10)
        shutil.rmtree(tmp, ignore_errors=True)


@contextmanager
def given_redis(url: str) -> Iterator[Broker]:
    """A Redis the user runs (``--broker``): its CPU is not measured."""
    yield Broker(url)


@contextmanager
def worker(argv: list[str], env: dict[str, str], log: Path, cwd: Path) -> Iterator[int]:
    """A worker process (``argv``), started in a session of its own and waited for until
    it logs `` ready.``; yields its pid. Stopped with its whole process group."""
    with log.open("wb") as out:
        proc = subprocess.Popen(
            argv, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True, cwd=cwd
        )
    try:
        deadline = time.monotonic() + 60
        while b" ready." not in log.read_bytes():
            if proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"worker did not start:\n{log.read_text()[-2000:]}")
            time.sleep(0.1)
        yield proc.pid
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def cpu_s(pid: int | None) -> float | None:
    """CPU seconds (user + system) process ``pid`` and its living descendants have spent
    (a prefork worker's pool processes are its children); ``None`` without ``/proc`` or
    ``pid``."""
    if pid is None or not os.path.isdir("/proc"):
        return None
    parents: dict[int, int] = {}
    spent: dict[int, float] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as fh:
                stat = fh.read()
        except OSError:  # gone meanwhile
            continue
        # Fields after the command (which may hold spaces): state, ppid, ... utime, stime.
        fields = stat[stat.rindex(b")") + 2 :].split()
        parents[int(name)] = int(fields[1])
        spent[int(name)] = (int(fields[11]) + int(fields[12])) / _TICKS
    if pid not in spent:
        return None
    family, grew = {pid}, True
    while grew:
        grew = False
        for child, parent in parents.items():
            if parent in family and child not in family:
                family.add(child)
                grew = True
    return sum(spent[p] for p in family)
