"""Files into and out of a Docker sandbox through the engine's archive API.

In: one tar of the workspace files, owned by the sandbox user. Out: the engine's
tar of each requested path, read with a byte cap, every member checked (no links,
no absolute or ``..`` names, only regular files and directories, nothing outside
the requested path).
"""

from __future__ import annotations

import base64
import io
import json
import posixpath
import tarfile
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from pact_workers.errors import ArtifactError
from pact_workers.sandbox.base import MAX_COLLECT_FILES, safe_relpath

WORKSPACE = "/workspace"
SANDBOX_UID = 10001


def _errors() -> Any:
    """docker-py's exception module, imported when first needed (it has no type stubs)."""
    import docker.errors  # type: ignore[import-untyped]

    return docker.errors


#: Slack over ``max_collect_bytes`` for tar headers and padding in the outputs' archive.
TAR_OVERHEAD_BYTES = 1024 * (2 * MAX_COLLECT_FILES + 16)
#: Go's ``os.ModeSymlink``, as the engine reports it in a path's stat.
_GO_MODE_SYMLINK = 1 << 27


def workspace_tar(files: Mapping[str, bytes]) -> bytes:
    """A tar of ``files`` (already checked), owned by the sandbox user."""
    buf = io.BytesIO()
    dirs: set[str] = set()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for rel, data in sorted(files.items()):
            parent = posixpath.dirname(rel)
            chain: list[str] = []
            while parent and parent not in dirs:
                chain.append(parent)
                parent = posixpath.dirname(parent)
            for directory in reversed(chain):
                dirs.add(directory)
                tar.addfile(tar_member(directory, tarfile.DIRTYPE, 0o755))
            info = tar_member(rel, tarfile.REGTYPE, 0o644)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def tar_member(name: str, kind: bytes, mode: int) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.mode = mode
    info.uid = info.gid = SANDBOX_UID
    info.mtime = int(time.time())
    return info


def collect_outputs(
    client: Any, container: Any, wanted: Sequence[str], max_bytes: int
) -> dict[str, bytes]:
    """Read the requested workspace files or directories back, refusing anything unsafe.

    Raises:
        ArtifactError: a symlink (the path, a parent or a member), a member that is not
            a regular file or directory or that escapes, or more than the caps.
    """
    out: dict[str, bytes] = {}
    total = 0
    for rel in wanted:
        # The engine resolves symlinks in the parents of an archive path (inside the
        # container), which could read from outside the workspace: refuse those.
        parts = rel.split("/")
        for depth in range(1, len(parts)):
            parent = "/".join(parts[:depth])
            stat = stat_path(client, container.id, f"{WORKSPACE}/{parent}")
            if stat is None:
                break
            if stat.get("mode", 0) & _GO_MODE_SYMLINK:
                raise ArtifactError(
                    f"output path {parent!r} is a symlink; outputs must be regular files"
                )
        try:
            chunks, stat = container.get_archive(f"{WORKSPACE}/{rel}")
        except _errors().NotFound:
            continue
        if stat.get("mode", 0) & _GO_MODE_SYMLINK:
            raise ArtifactError(f"output path {rel!r} is a symlink; outputs must be regular files")
        prefix = posixpath.dirname(rel)
        reader = ChunkReader(iter(chunks), limit=max_bytes + TAR_OVERHEAD_BYTES)
        members = 0
        with tarfile.open(fileobj=reader, mode="r|") as tar:
            for member in tar:
                members += 1
                name = member_path(prefix, member.name, rel)
                if member.issym() or member.islnk():
                    raise ArtifactError(
                        f"output path {name!r} is a symlink; outputs must be regular files"
                    )
                if members > 4 * MAX_COLLECT_FILES:
                    raise ArtifactError(f"outputs exceed the cap ({MAX_COLLECT_FILES} files)")
                if member.isdir() or "__pycache__" in name.split("/"):
                    continue
                if not member.isreg():
                    raise ArtifactError(f"output path {name!r} is not a regular file")
                total += member.size
                if total > max_bytes or len(out) >= MAX_COLLECT_FILES:
                    raise ArtifactError(
                        f"outputs exceed the cap ({max_bytes} bytes / {MAX_COLLECT_FILES} files)"
                    )
                data = tar.extractfile(member)
                out[name] = data.read() if data is not None else b""
    return out


def member_path(prefix: str, name: str, wanted: str) -> str:
    """The workspace-relative path of an archive member; it must lie under ``wanted``."""
    if name.startswith("/"):
        raise ArtifactError(f"output archive member {name!r} is absolute")
    try:
        path = safe_relpath(posixpath.join(prefix, name) if prefix else name)
    except ArtifactError as exc:
        raise ArtifactError(f"output archive member {name!r} escapes the workspace") from exc
    if path != wanted and not path.startswith(wanted + "/"):
        raise ArtifactError(f"output archive member {name!r} is outside {wanted!r}")
    return path


def stat_path(client: Any, container_id: str, path: str) -> dict[str, Any] | None:
    """The engine's stat of ``path`` in the container (not following a final symlink)."""
    url = client.api._url("/containers/{0}/archive", container_id)
    response = client.api.head(url, params={"path": path})
    try:
        if response.status_code == 404:
            return None
        client.api._raise_for_status(response)
        header = response.headers.get("X-Docker-Container-Path-Stat", "")
        return json.loads(base64.b64decode(header)) if header else None
    finally:
        response.close()


class ChunkReader(io.RawIOBase):
    """A read-only file over an iterator of byte chunks that refuses to read past ``limit``."""

    def __init__(self, chunks: Iterator[bytes], *, limit: int) -> None:
        self._chunks = chunks
        self._limit = limit
        self._read = 0
        self._pending = b""

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        while not self._pending:
            try:
                self._pending = next(self._chunks)
            except StopIteration:
                return 0
        size = min(len(buffer), len(self._pending))
        buffer[:size] = self._pending[:size]
        self._pending = self._pending[size:]
        self._read += size
        if self._read > self._limit:
            raise ArtifactError(f"outputs exceed the cap ({self._limit} bytes of archive)")
        return size
