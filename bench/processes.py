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
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pact_workers.sandbox.reaper import descendants

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
    ``pid``, or when it is gone."""
    if pid is None or not os.path.isdir("/proc"):
        return None
    spent = [_own_cpu_s(p) for p in [pid, *descendants(pid)]]
    if spent[0] is None:
        return None
    return sum(s for s in spent if s is not None)


def _own_cpu_s(pid: int) -> float | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            stat = fh.read()
    except OSError:  # gone meanwhile
        return None
    # The fields after the command name (which may hold spaces): utime and stime are
    # the 12th and 13th.
    fields = stat[stat.rindex(b")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / _TICKS


def measured(
    batch: Callable[[], Any], worker_pid: int, redis_pid: int | None
) -> tuple[Any, dict[str, float]]:
    """Run ``batch``; return what it returned and the CPU seconds it cost this process
    (user, system), the worker (with its pool) and Redis (when the server is ours)."""
    before = (os.times(), cpu_s(worker_pid), cpu_s(redis_pid))
    value = batch()
    after = (os.times(), cpu_s(worker_pid), cpu_s(redis_pid))
    spent = {
        "user": after[0].user - before[0].user,
        "system": after[0].system - before[0].system,
    }
    for name, was, now in (("worker", before[1], after[1]), ("redis", before[2], after[2])):
        if was is not None and now is not None:
            spent[name] = now - was
    return value, spent


def cpu_per_item(rounds: list[dict[str, float]], items: int) -> dict[str, float]:
    """The medians over ``rounds`` of each process's CPU, and of their total, in ms per
    item."""
    ms = {name: statistics.median(r[name] for r in rounds) / items * 1000 for name in rounds[0]}
    ms["total"] = statistics.median(sum(r.values()) for r in rounds) / items * 1000
    return {name: round(value, 3) for name, value in ms.items()}
