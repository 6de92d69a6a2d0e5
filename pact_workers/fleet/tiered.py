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

    def put_blobs(self, blobs: list[bytes]) -> list[str]:
        """Several blobs: each locally, and to Redis in one round trip where it can."""
        for data in blobs:
            self.local.put_blob(data)
        put_many = getattr(self.remote, "put_blobs", None)
        if put_many is not None:
            return list(put_many(blobs))
        return [self.remote.put_blob(data) for data in blobs]

    def get_blobs(self, digests: list[str]) -> list[bytes]:
        """Several blobs: local ones from disk, the rest from Redis in one round trip."""
        found = {d: self.local.get_blob(d) for d in digests if self.local.has_blob(d)}
        missing = [d for d in dict.fromkeys(digests) if d not in found]
        if missing:
            get_many = getattr(self.remote, "get_blobs", None)
            fetched = get_many(missing) if get_many is not None else None
            for digest, data in zip(
                missing, fetched or [self.remote.get_blob(d) for d in missing], strict=True
            ):
                self.local.put_blob(data)
                found[digest] = data
        return [found[d] for d in digests]

    def get_blob(self, digest: str) -> bytes:
        if self.local.has_blob(digest):
            return self.local.get_blob(digest)
        data = self.remote.get_blob(digest)
        self.local.put_blob(data)
        return data

    def refresh_blobs(self, digests: list[str]) -> None:
        """Put blobs the scheduler holds into Redis again, in one round trip (workers
        read them there, and Redis may have restarted without them since)."""
        if digests:
            self.put_blobs(self.get_blobs(digests))

    def has_blob(self, digest: str) -> bool:
        return self.local.has_blob(digest) or self.remote.has_blob(digest)

    def sync(self) -> None:
        """Make the local tier's deferred writes durable (Redis keeps its own)."""
        sync = getattr(self.local, "sync", None)
        if sync is not None:
            sync()
