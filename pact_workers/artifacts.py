"""A content-addressed artifact store: blobs by sha256, bundles as manifests.

A *bundle* is a set of files (workspace-relative path -> bytes). It is stored as
one blob per file plus a manifest blob (canonical JSON of path -> digest); the
manifest's digest names the bundle. The same bytes always get the same digest,
so bundles can be compared, cached and shipped by name alone.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import sys
import threading
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Protocol

from pact_workers.errors import ArtifactError, CorruptArtifact
from pact_workers.files import atomic_write, deferred_sync
from pact_workers.sandbox.base import safe_relpath

Bundle = dict[str, bytes]

#: Largest single blob accepted (an agent's output should never approach it).
MAX_BLOB_BYTES = 32 * 1024 * 1024

EMPTY_BUNDLE: Bundle = {}


def digest_bytes(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def manifest_bytes(manifest: Mapping[str, str]) -> bytes:
    return _COMPACT.encode({"files": dict(sorted(manifest.items()))}).encode()


#: ``json.dumps(..., separators=(",", ":"))`` without making an encoder per call (a run
#: writes a manifest per dispatch).
_COMPACT = json.JSONEncoder(separators=(",", ":"))


class BlobStore(Protocol):
    """The primitive operations every store backend provides."""

    def put_blob(self, data: bytes) -> str: ...

    def get_blob(self, digest: str) -> bytes: ...

    def has_blob(self, digest: str) -> bool: ...


class ArtifactStore:
    """Bundles on top of any :class:`BlobStore`.

    Manifests are immutable (named by their digest), so parsed ones are kept in a
    cache: the scheduler reads the same contracts' and implementations' manifests for
    every dependent it dispatches (a parent's closure names every component under it).
    The cache is bounded by the paths it holds, not by the manifests: most manifests
    are a file or two, so a run of 10,000 components keeps every output's manifest
    (a few MB), while a few merged ones of thousands of paths cannot crowd it.
    """

    #: Paths of parsed manifests kept (least recently used manifests go first).
    MANIFEST_CACHE_PATHS = 1 << 17

    def __init__(self, blobs: BlobStore) -> None:
        self.blobs = blobs
        self._manifests: OrderedDict[str, dict[str, str]] = OrderedDict()
        self._cached_paths = 0
        self._lock = threading.Lock()

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

    def put_manifest(self, manifest: Mapping[str, str]) -> str:
        """A bundle made of blobs already in the store (path -> digest), stored by
        writing its manifest alone: its name is the one :meth:`put_bundle` gives the
        same files, without reading or hashing them again. A blob store with a tier
        that may have lost blobs (the fleet's Redis, restarted) is given them again.

        Raises:
            ArtifactError: a path that is not a safe relative path, or a blob that is
                not in the store.
        """
        checked = {safe_relpath(path): digest for path, digest in manifest.items()}
        digests = list(dict.fromkeys(checked.values()))
        refresh = getattr(self.blobs, "refresh_blobs", None)
        if refresh is not None:
            refresh(digests)
        else:
            missing = [d for d in digests if not self.blobs.has_blob(d)]
            if missing:
                raise ArtifactError(f"artifact {missing[0]} is not in the store")
        return self.blobs.put_blob(manifest_bytes(checked))

    def refresh(self, bundles: Iterable[str]) -> None:
        """Make sure a blob store's remote tier has ``bundles`` (manifests and files) for
        another while, where it has one whose blobs expire (the fleet's Redis): what a
        task names must be there when a worker reads it. Nothing to do otherwise.

        Raises:
            ArtifactError: a blob the store does not have in any tier.
        """
        refresh = getattr(self.blobs, "refresh_blobs", None)
        if refresh is None:
            return
        digests: list[str] = []
        for bundle in dict.fromkeys(bundles):
            digests.append(bundle)
            digests.extend(self.get_manifest(bundle).values())
        refresh(digests)

    def sync(self) -> None:
        """Make deferred writes durable, where the blob store defers them."""
        sync = getattr(self.blobs, "sync", None)
        if sync is not None:
            sync()

    def get_manifest(self, digest: str) -> dict[str, str]:
        cached = self._known_manifest(digest)
        if cached is not None:
            return dict(cached)
        return dict(self._parse_manifest(digest, self.blobs.get_blob(digest)))

    def _known_manifest(self, digest: str) -> dict[str, str] | None:
        """The cached manifest named ``digest`` (marked as just used), or None."""
        with self._lock:
            cached = self._manifests.get(digest)
            if cached is not None:
                self._manifests.move_to_end(digest)
            return cached

    def _parse_manifest(self, digest: str, doc: bytes) -> dict[str, str]:
        """The manifest ``doc`` (the blob named ``digest``), parsed and cached."""
        try:
            files = json.loads(doc)["files"]
            assert isinstance(files, dict)
        except (ValueError, KeyError, AssertionError, TypeError) as exc:
            raise ArtifactError(f"bundle {digest}: not a bundle manifest") from exc
        # Interned: the same digests recur across the manifests the cache holds.
        manifest = {safe_relpath(p): sys.intern(str(d)) for p, d in files.items()}
        if len(manifest) > self.MANIFEST_CACHE_PATHS // 8:
            return manifest  # one merged closure must not empty the cache
        with self._lock:
            if digest not in self._manifests:
                self._manifests[digest] = manifest
                self._cached_paths += len(manifest) + 1
            while self._cached_paths > self.MANIFEST_CACHE_PATHS and self._manifests:
                self._cached_paths -= len(self._manifests.popitem(last=False)[1]) + 1
        return manifest

    def prefetch(self, bundles: list[str]) -> None:
        """Bring ``bundles`` (their manifests, then their files) within reach at once,
        where the blob store keeps a remote tier (the fleet's tiered store fetches what
        it lacks in two round trips for all of them, instead of two per bundle as each
        is read). What cannot be fetched is left for the read that needs it to report."""
        fetch = getattr(self.blobs, "fetch", None)
        wanted = [d for d in dict.fromkeys(bundles) if d not in self._manifests]
        if fetch is None or not wanted:
            return
        try:
            docs = fetch(wanted)
            files: list[str] = []
            for digest, doc in docs.items():
                with contextlib.suppress(ArtifactError):
                    files.extend(self._parse_manifest(digest, doc).values())
            fetch(list(dict.fromkeys(files)))
        except ArtifactError:
            return

    def lost(self, digest: str) -> list[str]:
        """The blobs of bundle ``digest`` this store cannot give: [] when it has them
        all, ``[digest]`` when the manifest itself is gone or is no manifest. A remote
        tier's are fetched on the way (one round trip, none when a prefetch brought
        them), so the reads that follow find them."""
        try:
            files = list(dict.fromkeys(self.get_manifest(digest).values()))
        except ArtifactError:
            return [digest]
        fetch = getattr(self.blobs, "fetch", None)
        if fetch is None:
            return [d for d in files if not self.blobs.has_blob(d)]
        try:
            fetch(files)
            return []
        except ArtifactError:  # one is gone: which, fetching the others one by one
            return [d for d in files if not self._gettable(d)]

    def _gettable(self, digest: str) -> bool:
        try:
            self.blobs.get_blob(digest)
            return True
        except ArtifactError:
            return False

    def get_bundle(self, digest: str) -> Bundle:
        manifest = self.get_manifest(digest)
        get_many = getattr(self.blobs, "get_blobs", None)
        if get_many is not None:  # one round trip for a remote store
            return dict(zip(manifest, get_many(list(manifest.values())), strict=True))
        return {path: self.blobs.get_blob(d) for path, d in manifest.items()}

    def get_bundles(self, digests: Iterable[str]) -> dict[str, Bundle]:
        """Several bundles, by digest. A remote store is asked twice for all of them
        (the manifests it is not known by, then every file) rather than twice for each:
        a worker reads an attempt's inputs so.

        Raises:
            ArtifactError: a manifest or a file is missing, corrupt or not a manifest.
        """
        wanted = list(dict.fromkeys(digests))
        get_many = getattr(self.blobs, "get_blobs", None)
        if get_many is None:
            return {digest: self.get_bundle(digest) for digest in wanted}
        manifests: dict[str, dict[str, str]] = {}
        for digest in wanted:
            cached = self._known_manifest(digest)
            if cached is not None:
                manifests[digest] = cached
        unknown = [digest for digest in wanted if digest not in manifests]
        for digest, doc in zip(unknown, get_many(unknown) if unknown else [], strict=True):
            manifests[digest] = self._parse_manifest(digest, doc)
        files = list(dict.fromkeys(d for manifest in manifests.values() for d in manifest.values()))
        data = dict(zip(files, get_many(files) if files else [], strict=True))
        return {
            digest: {path: data[d] for path, d in manifests[digest].items()} for digest in wanted
        }


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
    """Blobs as files ``<root>/<aa>/<hex>``, written atomically (temp file + rename).

    Digests known to be on disk are remembered, so that storing the same bytes
    again costs no system call (a run stores the same specs and contracts for many
    dispatches); at most :attr:`KNOWN` of them, forgotten all at once beyond that (a
    run of 10,000 components writes hundreds of thousands of blobs).

    The bytes of the blobs stored or read last are kept too, up to :attr:`RECENT_BYTES`
    in all: a run reads back what it has just stored (a result's files at its check,
    then at its promotion; a contract at each dependent's dispatch), and each such
    read was a file's open, read and hash. Bytes kept were hashed to their digest, so
    serving them again is as safe as reading the file; a copy corrupted on disk since
    is found by the next reader that does not hold it.
    """

    KNOWN = 1 << 16
    #: Bytes of recent blobs kept, in all; a blob larger than an eighth of it is not.
    RECENT_BYTES = 4 << 20

    def __init__(self, root: Path, *, deferred: bool = False) -> None:
        self.root = Path(root)
        self._root = str(self.root)
        self._known: set[str] = set()
        self._recent: OrderedDict[str, bytes] = OrderedDict()
        self._recent_bytes = 0
        self._recent_lock = threading.Lock()
        #: Write blobs without an fsync each; :meth:`sync` makes them durable at once
        #: (the run loop calls it before it commits events that name them), with one
        #: sync of the file system (``files.deferred_sync``).
        self.deferred = deferred

    def _path(self, digest: str) -> str:
        algo, _, hexd = digest.partition(":")
        if algo != "sha256" or not _HEX64.fullmatch(hexd):
            raise ArtifactError(f"malformed artifact digest {digest!r}")
        return f"{self._root}/{hexd[:2]}/{hexd}"

    def put_blob(self, data: bytes) -> str:
        hexd = hashlib.sha256(data).hexdigest()
        digest = "sha256:" + hexd
        self._keep(digest, data)
        if digest in self._known:
            return digest
        path = f"{self._root}/{hexd[:2]}/{hexd}"  # a digest of our own making
        try:
            whole = os.stat(path).st_size == len(data) and _hashes_to(path, hexd)
        except FileNotFoundError:
            whole = False
        if not whole:  # absent, cut short by a power loss before a deferred sync, corrupt
            atomic_write(path, data, fsync=not self.deferred)
            if self.deferred:
                deferred_sync.wrote(self._root)
        self._remember(digest)
        return digest

    def mend_blob(self, data: bytes) -> str:
        """Write ``data`` over the copy on disk whatever its size (a copy read as
        corrupt: its size may still be right)."""
        digest = digest_bytes(data)
        atomic_write(self._path(digest), data, fsync=not self.deferred)
        if self.deferred:
            deferred_sync.wrote(self._root)
        self._remember(digest)
        self._keep(digest, data)
        return digest

    def _remember(self, digest: str) -> None:
        if len(self._known) >= self.KNOWN:
            self._known.clear()
        self._known.add(digest)

    def sync(self) -> None:
        """Make every blob written so far durable: one sync of each file system that
        deferred writes of this process went to (the project's promoted files too)."""
        deferred_sync.sync()

    def _keep(self, digest: str, data: bytes) -> None:
        if len(data) > self.RECENT_BYTES >> 3:
            return
        with self._recent_lock:
            if digest in self._recent:
                self._recent.move_to_end(digest)
                return
            self._recent[digest] = data
            self._recent_bytes += len(data)
            while self._recent_bytes > self.RECENT_BYTES:
                self._recent_bytes -= len(self._recent.popitem(last=False)[1])

    def get_blob(self, digest: str) -> bytes:
        data = self._recent.get(digest)
        if data is not None:
            return data
        path = self._path(digest)
        try:
            with open(path, "rb") as fh:
                data = fh.read()
        except FileNotFoundError:
            raise ArtifactError(f"artifact {digest} is not in the store") from None
        if digest_bytes(data) != digest:
            raise CorruptArtifact(f"artifact {digest} is corrupt on disk ({path})")
        self._remember(digest)
        self._keep(digest, data)
        return data

    def has_blob(self, digest: str) -> bool:
        return digest in self._known or os.path.exists(self._path(digest))


def _hashes_to(path: str, hexd: str) -> bool:
    """Whether the file at ``path`` holds the bytes of digest ``hexd`` (read once per
    process and blob: a store remembers the digests it has checked)."""
    try:
        with open(path, "rb") as fh:
            return hashlib.sha256(fh.read()).hexdigest() == hexd
    except OSError:
        return False


_HEX64 = re.compile(r"[0-9a-f]{64}")
