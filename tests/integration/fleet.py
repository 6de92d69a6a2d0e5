"""Real fleet processes for integration tests: ``pact worker`` and ``pact run`` subprocesses.

:class:`Fleet` starts processes, each in a session (process group) of its own with its
output in a log file, and guarantees that none outlives it: leaving the ``with`` block
(also on a failure or an interrupt) stops every process it started, SIGTERM to the
process group first, SIGKILL after a grace, together with every descendant that left the
group (the local sandbox runs each test suite in a session of its own). An atexit hook
kills whatever is left if the block never ran its exit, and on Linux a process started on
the main thread is killed by the kernel when pytest itself dies.

:meth:`Proc.lose` simulates losing the machine: the process group is frozen, the whole
process tree is snapshotted, and every process in it is SIGKILLed.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import TracebackType

import pytest

REPO = Path(__file__).resolve().parents[2]

#: How long a worker gets to log its "ready." line.
READY_TIMEOUT_S = 60.0
#: How long a process gets to exit after SIGTERM before it is SIGKILLed.
STOP_GRACE_S = 10.0
#: Lines of a log shown in failure messages.
TAIL_LINES = 40

_PR_SET_PDEATHSIG = 1
_LIVE: set[Proc] = set()


def _die_with_parent() -> None:
    """In the child before exec: have Linux SIGKILL it if pytest dies (even by SIGKILL).

    Only the direct child gets it; its own children are found through the process tree.
    """
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def _proc_table() -> list[tuple[int, int, int, str, int]]:
    """(pid, parent pid, process group, state, start time) of every process (/proc)."""
    table = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as fh:
                stat = fh.read()
        except OSError:
            continue  # exited meanwhile
        # The fields after the command name (which may hold spaces and parentheses).
        fields = stat[stat.rfind(b")") + 2 :].split()
        pid, ppid, pgrp, start = int(entry.name), int(fields[1]), int(fields[2]), int(fields[19])
        table.append((pid, ppid, pgrp, fields[0].decode(), start))
    return table


def descendants(pid: int) -> dict[int, int]:
    """Every live descendant of ``pid`` and of the members of process group ``pid``
    (Linux /proc): pid -> start time (which tells a process from a later one that
    reuses its pid)."""
    if not os.path.isdir("/proc"):
        return {}
    children: dict[int, list[int]] = {}
    members: list[int] = []
    started: dict[int, int] = {}
    for child, parent, group, state, start in _proc_table():
        if state == "Z":
            continue
        started[child] = start
        children.setdefault(parent, []).append(child)
        if group == pid and child != pid:
            members.append(child)
    found: dict[int, int] = {}
    todo = [*children.get(pid, []), *members]
    while todo:
        child = todo.pop(0)
        if child not in found:
            found[child] = started[child]
            todo.extend(children.get(child, []))
    return found


def _start_time(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            stat = fh.read()
    except OSError:
        return None
    return int(stat[stat.rfind(b")") + 2 :].split()[19])


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def group_alive(pgid: int) -> bool:
    """Whether any process of group ``pgid`` is alive (zombies waiting for a parent's
    wait() do not count)."""
    if os.path.isdir("/proc"):
        return any(group == pgid and state != "Z" for _, _, group, state, _ in _proc_table())
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def tail(path: Path, lines: int = TAIL_LINES) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError as exc:
        return f"(no log at {path}: {exc.strerror})"
    return "\n".join(text.splitlines()[-lines:])


class Proc:
    """One subprocess in its own session, its stdout and stderr in ``log``."""

    def __init__(self, name: str, argv: Sequence[str], log: Path, env: dict[str, str]) -> None:
        self.name = name
        self.argv = list(argv)
        self.log = log
        log.parent.mkdir(parents=True, exist_ok=True)
        on_main = threading.current_thread() is threading.main_thread()
        with log.open("wb") as out:
            self.popen = subprocess.Popen(
                self.argv,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=REPO,
                env=env,
                start_new_session=True,
                preexec_fn=_die_with_parent if sys.platform == "linux" and on_main else None,
            )
        self.pid = self.popen.pid
        #: Processes seen below this one that left its group (sandboxes): killed with it.
        self._strays: dict[int, int] = {}
        #: Set when the test ends the process on purpose (stop or lose).
        self.ended_on_purpose = False
        _LIVE.add(self)

    @property
    def returncode(self) -> int | None:
        return self.popen.poll()

    def running(self) -> bool:
        return self.popen.poll() is None

    def wait(self, timeout: float, context: Callable[[], str] | None = None) -> int:
        """Wait for the process to exit. On timeout, fail with ``context()`` (read while
        the process still runs) and the process's log; the process is stopped first."""
        try:
            return self.popen.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            details = context() if context is not None else ""
            self.stop()
            pytest.fail(
                f"{self.name} did not finish within {timeout:.0f} s\n{details}\n{self.describe()}"
            )

    def describe(self) -> str:
        return f"--- {self.name} ({self.log}), exit {self.returncode} ---\n{tail(self.log)}"

    def _snapshot(self) -> None:
        self._strays.update(descendants(self.pid))

    def _kill_strays(self) -> None:
        for pid, start in self._strays.items():
            if _start_time(pid) != start:
                continue  # gone (its pid may belong to another process by now)
            with contextlib.suppress(ProcessLookupError, PermissionError):
                # A sandbox leads a group of its own: take the group, then the process.
                if os.getpgid(pid) == pid:
                    os.killpg(pid, signal.SIGKILL)
                os.kill(pid, signal.SIGKILL)
        self._strays.clear()

    def lose(self) -> float:
        """Lose the machine: SIGKILL the whole process tree at once.

        Returns:
            The wall-clock time (``time.time()``) of the kill.
        """
        self.ended_on_purpose = True
        killed_at = time.time()
        self._kill_tree()
        self._reap()
        return killed_at

    def _kill_tree(self) -> None:
        # Freeze the group first so that nothing in it starts a new process while the
        # tree is read; SIGKILL ends stopped processes too.
        if group_alive(self.pid):
            _signal_group(self.pid, signal.SIGSTOP)
            self._snapshot()
            _signal_group(self.pid, signal.SIGKILL)
        self._kill_strays()

    def stop(self, grace_s: float = STOP_GRACE_S) -> None:
        """SIGTERM the process group, SIGKILL it after ``grace_s``; nothing survives."""
        self.ended_on_purpose = True
        if self.running():
            self._snapshot()
            _signal_group(self.pid, signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.popen.wait(timeout=grace_s)
        self._kill_tree()
        self._reap()

    def _reap(self) -> None:
        self.popen.wait()
        # The leader is gone; wait until the rest of its group is too.
        deadline = time.monotonic() + STOP_GRACE_S
        while group_alive(self.pid) and time.monotonic() < deadline:
            _signal_group(self.pid, signal.SIGKILL)
            time.sleep(0.01)
        _LIVE.discard(self)


class Worker(Proc):
    """A ``pact worker`` process."""

    def __init__(
        self,
        name: str,
        argv: Sequence[str],
        log: Path,
        env: dict[str, str],
        roles: Sequence[str],
    ) -> None:
        super().__init__(name, argv, log, env)
        self.roles = list(roles)

    def wait_ready(self, timeout_s: float = READY_TIMEOUT_S) -> None:
        """Wait for Celery's ``<hostname> ready.`` line; fail with the log tail if it
        does not come (the worker is stopped first)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError):
                if any(line.rstrip().endswith(" ready.") for line in self._lines()):
                    return
            if not self.running():
                self.stop()
                pytest.fail(f"worker {self.name} exited before it was ready\n{self.describe()}")
            time.sleep(0.05)
        self.stop()
        pytest.fail(f"worker {self.name} not ready within {timeout_s:.0f} s\n{self.describe()}")

    def _lines(self) -> list[str]:
        return self.log.read_text(errors="replace").splitlines()


def pact_argv(*args: str) -> list[str]:
    return [sys.executable, "-m", "scheduler.cli", *args]


class Fleet:
    """Starts ``pact worker`` and ``pact`` processes against one broker; stops them all.

    Use as a context manager::

        with Fleet(redis_url, tmp_path / "logs") as fleet:
            fleet.worker("a", roles=["contract_author", "test_author"])
            run = fleet.pact("run", ..., name="run")
            assert fleet.wait(run, 300) == 0, fleet.logs()
    """

    def __init__(self, broker_url: str, log_dir: Path) -> None:
        self.broker_url = broker_url
        self.log_dir = log_dir
        self.procs: list[Proc] = []
        self._names: dict[str, int] = {}

    def env(self) -> dict[str, str]:
        return {
            **os.environ,
            "PYTHONUNBUFFERED": "1",
            "COLUMNS": "200",
            "NO_COLOR": "1",
            "PACT_BROKER_URL": self.broker_url,
        }

    def _log_path(self, name: str) -> Path:
        n = self._names.get(name, 0)
        self._names[name] = n + 1
        return self.log_dir / (f"{name}.log" if n == 0 else f"{name}.{n}.log")

    def worker(
        self,
        name: str,
        *,
        roles: Sequence[str],
        concurrency: int = 2,
        lease_ttl_s: float | None = None,
        wait: bool = True,
        env: Mapping[str, str] | None = None,
    ) -> Worker:
        """Start ``pact worker`` for ``roles`` and (by default) wait until it is ready.

        ``env``: variables only this worker gets (the others and ``pact`` do not).
        """
        args = [
            "worker",
            "--broker",
            self.broker_url,
            "--roles",
            ",".join(roles),
            "--concurrency",
            str(concurrency),
        ]
        if lease_ttl_s is not None:
            args += ["--lease-ttl", str(lease_ttl_s)]
        proc = Worker(
            name, pact_argv(*args), self._log_path(name), {**self.env(), **(env or {})}, roles
        )
        self.procs.append(proc)
        if wait:
            proc.wait_ready()
        return proc

    def run(self, tree: Path, project: Path, *options: str, name: str = "run") -> Proc:
        """Start ``pact run TREE --project PROJECT OPTIONS... --executor celery`` on this
        fleet's broker, in the background."""
        args = ["run", str(tree), "--project", str(project), *options]
        return self.pact(*args, "--executor", "celery", "--broker", self.broker_url, name=name)

    def pact(self, *args: str, name: str = "pact") -> Proc:
        """Start ``pact ARGS...`` in the background."""
        proc = Proc(name, pact_argv(*args), self._log_path(name), self.env())
        self.procs.append(proc)
        return proc

    def wait(self, proc: Proc, timeout_s: float, context: Callable[[], str] | None = None) -> int:
        """Wait for ``proc`` to exit and return its exit code.

        Fails at once if a worker dies meanwhile without the test ending it (the run
        could only hang), and after ``timeout_s`` with ``context()`` and every log.
        """
        deadline = time.monotonic() + timeout_s
        while True:
            code = proc.popen.poll()
            if code is not None:
                return code
            dead = [w for w in self.workers() if not w.ended_on_purpose and not w.running()]
            late = time.monotonic() > deadline
            if dead or late:
                details = context() if context is not None else ""
                proc.stop()
                what = (
                    f"worker {dead[0].name} died (exit {dead[0].returncode}) while {proc.name} ran"
                    if dead
                    else f"{proc.name} did not finish within {timeout_s:.0f} s"
                )
                # The logs of the process and of the workers the test did not end.
                shown = [proc, *dead, *(w for w in self.workers() if w.running())]
                pytest.fail(f"{what}\n{details}\n{self.logs(*shown)}")
            time.sleep(0.05)

    def workers(self) -> list[Worker]:
        return [p for p in self.procs if isinstance(p, Worker)]

    def logs(self, *procs: Proc) -> str:
        """The tail of the log of ``procs`` (default: every process), for failure messages."""
        return "\n".join(p.describe() for p in procs or self.procs)

    def stop_all(self) -> None:
        # SIGTERM every group at once, so that the graces run in parallel.
        for proc in self.procs:
            if proc.running():
                proc._snapshot()
                _signal_group(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + STOP_GRACE_S
        for proc in self.procs:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.popen.wait(timeout=max(0.0, deadline - time.monotonic()))
        for proc in self.procs:
            proc.stop(grace_s=0)

    def __enter__(self) -> Fleet:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop_all()
        survivors = [p.name for p in self.procs if p.running() or group_alive(p.pid)]
        if exc is None:  # else the test's own failure is the one to report
            assert not survivors, f"processes survived SIGKILL: {survivors}"


@atexit.register
def _kill_leftovers() -> None:
    for proc in list(_LIVE):
        with contextlib.suppress(Exception):
            proc.stop(grace_s=0)
