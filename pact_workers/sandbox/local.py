"""The local sandbox: a subprocess in a fresh temporary workspace.

No isolation beyond a private directory. On Linux the command runs under the
reaper (:mod:`pact_workers.sandbox.reaper`), so that no process it started —
in the background, in a session of its own, double-forked — outlives the run,
whether the command exits, fails or is killed at its timeout. Elsewhere the
command's process group is killed as a whole at the end, which misses what
left the group. It is the embedded default and the reference the Docker
sandbox is tested against.
"""

from __future__ import annotations

import logging
import os
import select
import signal
import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO

from pact_workers.errors import ArtifactError, SandboxError
from pact_workers.sandbox import reaper
from pact_workers.sandbox.base import (
    MAX_COLLECT_FILES,
    SandboxRequest,
    SandboxResult,
    cap_text,
    safe_relpath,
)
from pact_workers.sandbox.cancel import POLL_S, cancel_event, check_cancelled

log = logging.getLogger(__name__)

#: How long past the timeout the reaper has to remove the command's tree and report
#: before it is killed itself (its sweep gives up after reaper.SWEEP_LIMIT_S).
REAPER_GRACE_S = reaper.SWEEP_LIMIT_S + 20.0


class LocalSandbox:
    """Runs each request in its own temporary directory; on Linux, nothing of it outlives it."""

    name = "local"

    def __init__(self, *, root: Path | None = None) -> None:
        self._root = root

    def run(self, request: SandboxRequest) -> SandboxResult:
        with tempfile.TemporaryDirectory(prefix="pact-sbx-", dir=self._root) as tmp:
            base = Path(tmp)
            workspace = base / "workspace"
            workspace.mkdir()
            write_files(workspace, request.files)
            pythonpath = os.pathsep.join(
                str(workspace / safe_relpath(p)) for p in request.pythonpath
            )
            env = request.environment.build_env(pythonpath)
            python = request.environment.resolve_python(env["PATH"]) or "python3"
            argv = [python if arg == "{python}" else arg for arg in request.command]
            out_path, err_path = base / "stdout", base / "stderr"
            started = time.monotonic()
            with out_path.open("wb") as out, err_path.open("wb") as err:
                run = _run_reaped if reaper.SUPPORTED else _run_grouped
                exit_code, timed_out = run(
                    argv, cwd=workspace, env=env, out=out, err=err, timeout_s=request.timeout_s
                )
            duration = time.monotonic() - started
            stdout, trunc_out = cap_text(
                _read_tail(out_path, request.max_output_bytes), request.max_output_bytes
            )
            stderr, trunc_err = cap_text(
                _read_tail(err_path, request.max_output_bytes), request.max_output_bytes
            )
            files = collect_files(workspace, request.collect, request.max_collect_bytes)
            return SandboxResult(
                exit_code=exit_code,
                stdout=stdout,
                stderr=stderr,
                duration_s=duration,
                timed_out=timed_out,
                output_truncated=trunc_out or trunc_err,
                files=files,
            )


def _run_reaped(
    argv: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    out: IO[bytes],
    err: IO[bytes],
    timeout_s: float,
) -> tuple[int, bool]:
    """Run ``argv`` under the reaper; return its exit code and whether it timed out."""
    read_fd, write_fd = os.pipe()
    try:
        try:
            proc = subprocess.Popen(
                reaper.command_line(argv, status_fd=write_fd, timeout_s=timeout_s, env=env),
                cwd=cwd,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                start_new_session=True,
                pass_fds=(write_fd,),
            )
        except OSError as exc:
            raise SandboxError(f"cannot start the reaper: {exc.strerror}") from exc
        finally:
            # Only the reaper may hold the write end, so that its death ends the report.
            os.close(write_fd)
        try:
            data = _read_report(read_fd, timeout_s + REAPER_GRACE_S, argv[0])
        except BaseException:
            # Interrupted (Ctrl-C, a worker shutting down): the tree goes now, not at
            # the timeout. SIGTERM tells the reaper to kill the command and sweep.
            proc.terminate()
            proc.wait()
            raise
    finally:
        os.close(read_fd)
    if data is None:
        log.warning("the reaper of %r did not finish in time; killing its session", argv[0])
        _kill_session(proc.pid, argv[0])
        proc.wait()
        return -signal.SIGKILL, True
    try:
        report = reaper.parse_report(data)
    except reaper.StartError as exc:
        proc.wait()
        raise SandboxError(f"cannot start {argv[0]!r}: {exc.strerror}") from exc
    if report is None:
        # The reaper died without a word (killed from outside). Unreaped, its pid is
        # still its session's id: what is still in the session goes; whatever had
        # left the session is out of reach.
        _kill_session(proc.pid, argv[0])
        proc.wait()
        return proc.returncode, False
    proc.wait()
    exit_code, timed_out, left = report
    if left:
        log.warning("%d processes of %r could not be killed", left, argv[0])
    return exit_code, timed_out


def _kill_session(sid: int, program: str) -> None:
    left = reaper.kill_session(sid)
    if left:
        log.warning("%d processes of %r could not be killed", left, program)


def _read_report(fd: int, timeout_s: float, program: str) -> bytes | None:
    """The reaper's report line from pipe ``fd`` (what there is at the pipe's end), or
    None when the reaper has said nothing and kept the pipe open for ``timeout_s``.

    Raises:
        SandboxCancelled: the attempt was cancelled meanwhile (the caller kills the tree).
    """
    deadline = time.monotonic() + timeout_s
    cancel = cancel_event()
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    data = b""
    # Stop at the end of the line, not only at the end of the pipe: a process forked
    # (without exec) elsewhere in this program may hold a copy of the write end.
    while not data.endswith(b"\n"):
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return None
        # With a cancel event the wait is sliced, so a cancel is seen within POLL_S.
        ready = poller.poll(1000 * (remaining if cancel is None else min(remaining, POLL_S)))
        check_cancelled(f"the sandboxed command {program!r}")
        if not ready:
            if cancel is None:
                return None
            continue
        chunk = os.read(fd, 4096)
        if not chunk:
            break
        data += chunk
    return data


def _run_grouped(
    argv: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    out: IO[bytes],
    err: IO[bytes],
    timeout_s: float,
) -> tuple[int, bool]:
    """Run ``argv`` as a new process group, killed as a whole at the end (no reaper)."""
    try:
        proc = subprocess.Popen(
            argv,
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            start_new_session=True,
        )
    except OSError as exc:
        raise SandboxError(f"cannot start {argv[0]!r}: {exc.strerror}") from exc
    timed_out = False
    deadline = time.monotonic() + timeout_s
    try:
        # Sliced, so a cancel of the attempt (SandboxCancelled) is seen within POLL_S.
        while proc.poll() is None:
            check_cancelled(f"the sandboxed command {argv[0]!r}")
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                timed_out = True
                break
            try:
                proc.wait(timeout=min(remaining, POLL_S))
            except subprocess.TimeoutExpired:
                pass
    finally:
        # The whole group goes, including anything left in the background.
        _kill_group(proc.pid)
        proc.wait()
    return (-signal.SIGKILL if timed_out else proc.returncode), timed_out


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _read_tail(path: Path, limit: int) -> bytes:
    size = path.stat().st_size
    with path.open("rb") as fh:
        if size > limit + 1:
            fh.seek(size - limit - 1)
        return fh.read()


def write_files(workspace: Path, files: Mapping[str, bytes]) -> None:
    """Materialise ``files`` under ``workspace``; every path is checked first."""
    checked = {safe_relpath(p): data for p, data in files.items()}
    for rel, data in checked.items():
        target = workspace / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)


def collect_files(workspace: Path, wanted: Sequence[str], max_bytes: int) -> dict[str, bytes]:
    """Read the requested files or directories back, refusing anything that escapes.

    Raises:
        ArtifactError: a symlink, a path outside the workspace, or more than the caps.
    """
    out: dict[str, bytes] = {}
    total = 0
    root = workspace.resolve()
    for want in wanted:
        rel = safe_relpath(want)
        start = workspace / rel
        if start.is_symlink():
            raise ArtifactError(f"output path {rel!r} is a symlink; outputs must be regular files")
        if not start.exists():
            continue
        paths = [start] if start.is_file() else sorted(start.rglob("*"))
        for path in paths:
            rel_path = path.relative_to(workspace).as_posix()
            if path.is_symlink():
                raise ArtifactError(
                    f"output path {rel_path!r} is a symlink; outputs must be regular files"
                )
            if path.is_dir() or "__pycache__" in path.parts:
                continue
            if not path.resolve().is_relative_to(root):
                raise ArtifactError(f"output path {rel_path!r} escapes the workspace")
            if not path.is_file():
                raise ArtifactError(f"output path {rel_path!r} is not a regular file")
            total += path.stat().st_size
            if total > max_bytes or len(out) >= MAX_COLLECT_FILES:
                raise ArtifactError(
                    f"outputs exceed the cap ({max_bytes} bytes / {MAX_COLLECT_FILES} files)"
                )
            out[rel_path] = path.read_bytes()
    return out
