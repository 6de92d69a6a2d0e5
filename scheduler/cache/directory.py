"""The action cache in a directory: every embedded run on one machine shares it.

Layout under the root (``PACT_CACHE_DIR``, default ``$XDG_CACHE_HOME/pact-fleet``)::

    entries/<aa>/<hex>.json    one entry per action key sha256:<aa...>, written atomically
    blobs/<aa>/<hex>           the results' files and manifests, content-addressed

Entries are replaced atomically (temporary file and rename), so concurrent runs may
read and write the same cache: a reader sees an old entry or a new one, never half of
one. The blobs are written before the entry that names them.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path

from pact_workers.artifacts import ArtifactStore, Bundle, DirectoryBlobStore
from pact_workers.errors import ArtifactError
from pact_workers.files import atomic_write
from scheduler.cache.entry import CacheEntry, check_digest

__all__ = ["DirectoryActionCache"]

log = logging.getLogger(__name__)


class DirectoryActionCache:
    """An :class:`~scheduler.cache.base.ActionCache` in the directory ``root``."""

    name = "directory"

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.store = ArtifactStore(DirectoryBlobStore(self.root / "blobs"))

    @property
    def location(self) -> str:
        return str(self.root)

    def _entry_path(self, key: str) -> Path:
        try:
            hexd = check_digest(key, "action key").removeprefix("sha256:")
        except ValueError as exc:
            raise ArtifactError(str(exc)) from None
        return self.root / "entries" / hexd[:2] / f"{hexd}.json"

    def get(self, key: str) -> CacheEntry | None:
        path = self._entry_path(key)
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as exc:
            log.warning("action cache entry %s cannot be read: %s", path, exc)
            return None
        return CacheEntry.from_bytes(raw, key)

    def put(self, entry: CacheEntry, files: Mapping[str, bytes]) -> None:
        path = self._entry_path(entry.key)
        # Private: results are the project's code.
        self.root.mkdir(mode=0o700, parents=True, exist_ok=True)
        digest = self.store.put_bundle(files)
        if digest != entry.output:
            raise ArtifactError(
                f"the files given for cache entry {entry.key} are bundle {digest}, "
                f"not {entry.output}"
            )
        atomic_write(path, entry.to_bytes())

    def files(self, entry: CacheEntry) -> Bundle:
        return self.store.get_bundle(entry.output)
