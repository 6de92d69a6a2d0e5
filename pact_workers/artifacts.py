"""A content-addressed artifact store: blobs by sha256, bundles as manifests.

A *bundle* is a set of files (workspace-relative path -> bytes). It is stored as
one blob per file plus a manifest blob (canonical JSON of path -> digest); the
manifest's digest names the bundle. The same bytes always get the same digest,
so bundles can be compared, cached and shipped by name alone.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Protocol

from pact_workers.errors import ArtifactError
from pact_workers.files import atomic_write
from pact_workers.sandbox.base import safe_relpath

Bundle = dict[str, bytes]

#: Largest single blob accepted (an agent's output should never approach it).
MAX_BLOB_BYTES = 32 * 1024 * 1024

EMPTY_BUNDLE: Bundle = {}


def digest_bytes(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def manifest_bytes(manifest: Mapping[str, str]) -> bytes:
    return json.dumps({"files": dict(sorted(manifest.items()))}, separators=(",", ":")).encode()


class BlobStore(Protocol):
    """The primitive operations every store backend provides."""

    def put_blob(self, data: bytes) -> str: ...

    def get_blob(self, digest: str) -> bytes: ...

    def has_blob(self, digest: str) -> bool: ...


class ArtifactStore:
    """Bundles on top of any :class:`BlobStore`."""

    def __init__(self, blobs: BlobStore) -> None:
        self.blobs = blobs

    def put_bundle(self, files: Mapping[str, bytes]) -> str:
        paths = []
        for path, data in files.items():
            rel = safe_relpath(path)
            if len(data) > MAX_BLOB_BYTES:
                raise ArtifactError(
                    f"artifact {rel!r} is {len(data)} bytes; the limit is {MAX_BLOB_BYTES}"
                )
            paths.append(rel)
        datas = list(files.values())
        manifest = {rel: digest_bytes(data) for rel, data in zip(paths, datas, strict=True)}
        doc = manifest_bytes(manifest)
        put_many = getattr(self.blobs, "put_blobs", None)
        if put_many is not None:  # one round trip for a remote store
            return str(put_many([*datas, doc])[-1])
        for data in datas:
            self.blobs.put_blob(data)
        return self.blobs.put_blob(doc)

    def get_manifest(self, digest: str) -> dict[str, str]:
        try:
            doc = json.loads(self.blobs.get_blob(digest))
            files = doc["files"]
            assert isinstance(files, dict)
        except (ValueError, KeyError, AssertionError, TypeError) as exc:
            raise ArtifactError(f"bundle {digest}: not a bundle manifest") from exc
        return {safe_relpath(p): d for p, d in files.items()}

    def get_bundle(self, digest: str) -> Bundle:
        return {path: self.blobs.get_blob(d) for path, d in self.get_manifest(digest).items()}


class MemoryBlobStore:
    """Blobs in a dict; thread-safe. For tests and single-process runs."""

    def __init__(self) -> None:
        self._blobs: dict[str, bytes] = {}
        self._lock = threading.Lock()

    def put_blob(self, data: bytes) -> str:
        digest = digest_bytes(data)
        with self._lock:
            self._blobs.setdefault(digest, data)
        return digest

    def get_blob(self, digest: str) -> bytes:
        try:
            return self._blobs[digest]
        except KeyError:
            raise ArtifactError(f"artifact {digest} is not in the store") from None

    def has_blob(self, digest: str) -> bool:
        return digest in self._blobs


class DirectoryBlobStore:
    """Blobs as files ``<root>/<aa>/<hex>``, written atomically (temp file + rename)."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    def _path(self, digest: str) -> Path:
        algo, _, hexd = digest.partition(":")
        if algo != "sha256" or len(hexd) != 64 or not all(c in "0123456789abcdef" for c in hexd):
            raise ArtifactError(f"malformed artifact digest {digest!r}")
        return self.root / hexd[:2] / hexd

    def put_blob(self, data: bytes) -> str:
        digest = digest_bytes(data)
        path = self._path(digest)
        if not path.exists():
            atomic_write(path, data)
        return digest

    def get_blob(self, digest: str) -> bytes:
        path = self._path(digest)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            raise ArtifactError(f"artifact {digest} is not in the store") from None
        if digest_bytes(data) != digest:
            raise ArtifactError(f"artifact {digest} is corrupt on disk ({path})")
        return data

    def has_blob(self, digest: str) -> bool:
        return self._path(digest).exists()
