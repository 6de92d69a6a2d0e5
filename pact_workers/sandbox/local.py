"""The local sandbox: a subprocess in a fresh temporary workspace.

No isolation beyond a private directory and a process group that is killed
as a whole at the timeout. It is the embedded default and the reference the
Docker sandbox is tested against.
"""

from __future__ import annotations

import os
import signal
import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from pact_workers.errors import ArtifactError, SandboxError
from pact_workers.sandbox.base import (
    MAX_COLLECT_FILES,
    SandboxRequest,
    SandboxResult,
    cap_text,
    safe_relpath,
)


class LocalSandbox:
    """Runs each request in its own temporary directory as a new process group."""

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
            timed_out = False
            with out_path.open("wb") as out, err_path.open("wb") as err:
                try:
                    proc = subprocess.Popen(
                        argv,
                        cwd=workspace,
                        env=env,
                        stdin=subprocess.DEVNULL,
                        stdout=out,
                        stderr=err,
                        start_new_session=True,
                    )
                except OSError as exc:
                    raise SandboxError(f"cannot start {argv[0]!r}: {exc.strerror}") from exc
                try:
                    proc.wait(timeout=request.timeout_s)
                except subprocess.TimeoutExpired:
                    timed_out = True
                finally:
                    # The whole group goes, including anything left in the background.
                    _kill_group(proc.pid)
                    proc.wait()
            duration = time.monotonic() - started
            stdout, trunc_out = cap_text(
                _read_tail(out_path, request.max_output_bytes), request.max_output_bytes
            )
            stderr, trunc_err = cap_text(
                _read_tail(err_path, request.max_output_bytes), request.max_output_bytes
            )
            files = collect_files(workspace, request.collect, request.max_collect_bytes)
            return SandboxResult(
                exit_code=-signal.SIGKILL if timed_out else proc.returncode,
                stdout=stdout,
                stderr=stderr,
                duration_s=duration,
                timed_out=timed_out,
                output_truncated=trunc_out or trunc_err,
                files=files,
            )


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
