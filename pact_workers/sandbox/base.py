"""The sandbox interface: run one command in a fresh workspace, files in and out.

Every sandbox takes a :class:`SandboxRequest` and returns a :class:`SandboxResult`.
Files enter as a mapping of workspace-relative paths to bytes and leave the same
way, so nothing is shared between the caller and the sandbox but those bytes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Protocol, runtime_checkable

from pact_workers.errors import ArtifactError
from pact_workers.models.environment import EnvironmentSpec

#: Default caps; a request may lower or raise them.
MAX_OUTPUT_BYTES = 1_000_000
MAX_COLLECT_BYTES = 20_000_000
MAX_COLLECT_FILES = 2_000


@dataclass(frozen=True)
class SandboxRequest:
    """One command to run in a fresh workspace.

    ``command`` may name ``{python}``, which each sandbox replaces with the
    interpreter of ``environment``.
    """

    command: Sequence[str]
    files: Mapping[str, bytes] = field(default_factory=dict)
    environment: EnvironmentSpec = field(default_factory=EnvironmentSpec)
    #: Workspace-relative directories put on PYTHONPATH.
    pythonpath: Sequence[str] = ()
    timeout_s: float = 300.0
    #: Workspace-relative files or directories to bring back.
    collect: Sequence[str] = ()
    network: bool = False
    max_output_bytes: int = MAX_OUTPUT_BYTES
    max_collect_bytes: int = MAX_COLLECT_BYTES
    max_memory_mb: int = 1024
    max_pids: int = 256
    cpus: float = 1.0


@dataclass(frozen=True)
class SandboxResult:
    """What a sandboxed command did."""

    exit_code: int
    stdout: str
    stderr: str
    duration_s: float
    timed_out: bool = False
    oom_killed: bool = False
    output_truncated: bool = False
    files: Mapping[str, bytes] = field(default_factory=dict)


@runtime_checkable
class Sandbox(Protocol):
    """Runs commands in isolated, throw-away workspaces."""

    name: str

    def run(self, request: SandboxRequest) -> SandboxResult:
        """Run ``request.command``; raise SandboxError only when it could not be run at all."""
        ...


def safe_relpath(path: str) -> str:
    """Normalise a workspace-relative path or reject one that could escape the workspace.

    Raises:
        ArtifactError: absolute paths, ``..`` parts, empty or NUL-containing names.
    """
    if not path or "\x00" in path or "\\" in path:
        raise ArtifactError(f"artifact path {path!r}: empty or contains NUL or backslash")
    if all(part and part != "." and part != ".." for part in path.split("/")):
        return path  # already normal (the common case: paths the store wrote itself)
    pure = PurePosixPath(path)
    if pure.is_absolute():
        raise ArtifactError(f"artifact path {path!r}: absolute paths are not allowed")
    if any(part == ".." for part in pure.parts):
        raise ArtifactError(f"artifact path {path!r}: '..' would leave the workspace")
    parts = [p for p in pure.parts if p != "."]
    if not parts:
        raise ArtifactError(f"artifact path {path!r}: names no file")
    return "/".join(parts)


def cap_text(data: bytes, limit: int) -> tuple[str, bool]:
    """Decode ``data`` leniently, keeping at most ``limit`` bytes (the tail is kept)."""
    if len(data) <= limit:
        return data.decode("utf-8", "replace"), False
    return "[... output truncated ...]\n" + data[-limit:].decode("utf-8", "replace"), True
