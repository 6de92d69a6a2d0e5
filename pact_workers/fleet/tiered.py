"""A blob store in two tiers: a local directory in front of the fleet's Redis store.

The scheduler writes every blob to both (workers read from Redis) and reads
locally first, so a run's verified artifacts survive Redis losing its data.
"""

from __future__ import annotations

from pact_workers.artifacts import BlobStore


class TieredBlobStore:
    def __init__(self, local: BlobStore, remote: BlobStore) -> None:
        self.local, self.remote = local, remote

    def put_blob(self, data: bytes) -> str:
        self.local.put_blob(data)
        return self.remote.put_blob(data)

    def get_blob(self, digest: str) -> bytes:
        if self.local.has_blob(digest):
            return self.local.get_blob(digest)
        data = self.remote.get_blob(digest)
        self.local.put_blob(data)
        return data

    def has_blob(self, digest: str) -> bool:
        return self.local.has_blob(digest) or self.remote.has_blob(digest)

    def sync(self) -> None:
        """Make the local tier's deferred writes durable (Redis keeps its own)."""
        sync = getattr(self.local, "sync", None)
        if sync is not None:
            sync()
