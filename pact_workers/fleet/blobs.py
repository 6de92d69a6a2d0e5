"""The artifact store's blobs in Redis: ``pact:artifact:<digest>`` -> bytes.

``ArtifactStore(RedisBlobStore(client))`` gives workers on any machine the same
content-addressed store, with Redis as the only thing they share.
"""

from __future__ import annotations

import re

import redis

from pact_workers.artifacts import MAX_BLOB_BYTES, digest_bytes
from pact_workers.errors import ArtifactError
from pact_workers.fleet import keys

__all__ = ["RedisBlobStore"]

_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")


def _key(digest: str) -> str:
    if not isinstance(digest, str) or not _DIGEST.fullmatch(digest):
        raise ArtifactError(f"malformed artifact digest {digest!r} (expected sha256:<64 hex>)")
    return keys.artifact(digest)


class RedisBlobStore:
    """A :class:`~pact_workers.artifacts.BlobStore` on Redis strings.

    Blobs are immutable and named by their sha256, so a write is SET NX (a blob that
    is already there is left alone) and a read checks the digest of what came back.

    Args:
        client: a bytes (not decoded) client, e.g. from
            :func:`~pact_workers.fleet.connection.redis_from_url`.
        max_blob_bytes: the largest blob accepted.
    """

    def __init__(self, client: redis.Redis, *, max_blob_bytes: int = MAX_BLOB_BYTES) -> None:
        self.client = client
        self.max_blob_bytes = max_blob_bytes

    def put_blob(self, data: bytes) -> str:
        """Store ``data`` (if it is not there yet) and return its digest.

        Raises:
            ArtifactError: ``data`` is larger than ``max_blob_bytes``.
        """
        self.check_size(data)
        digest = digest_bytes(data)
        self.client.set(keys.artifact(digest), data, nx=True)
        return digest

    def put_blobs(self, blobs: list[bytes]) -> list[str]:
        """Store several blobs in one round trip (a bundle's files and its manifest)."""
        for data in blobs:
            self.check_size(data)
        digests = [digest_bytes(data) for data in blobs]
        pipe = self.client.pipeline(transaction=False)
        for digest, data in zip(digests, blobs, strict=True):
            pipe.set(keys.artifact(digest), data, nx=True)
        pipe.execute()
        return digests

    def check_size(self, data: bytes) -> None:
        if len(data) > self.max_blob_bytes:
            raise ArtifactError(
                f"artifact of {len(data)} bytes is over the limit of {self.max_blob_bytes} "
                "bytes per file in the Redis artifact store. Agent output should be source "
                "and tests: remove generated, binary or data files from the output "
                "(or raise max_blob_bytes if such a file is really wanted)"
            )

    def get_blob(self, digest: str) -> bytes:
        """Return the bytes named ``digest``.

        Raises:
            ArtifactError: the digest is malformed, the blob is missing (the store lost
                it), or its bytes no longer match the digest.
        """
        key = _key(digest)
        return self._checked(digest, key, self.client.get(key))

    def get_blobs(self, digests: list[str]) -> list[bytes]:
        """Several blobs in one round trip (a bundle's files); see :meth:`get_blob`."""
        if not digests:
            return []
        names = [_key(d) for d in digests]
        values = self.client.mget(names)
        return [self._checked(d, k, v) for d, k, v in zip(digests, names, values, strict=True)]

    @staticmethod
    def _checked(digest: str, key: str, data: object) -> bytes:
        if data is None:
            raise ArtifactError(
                f"artifact {digest} is missing from the Redis artifact store ({key}): it "
                "was stored and then lost (Redis was flushed, restarted without "
                "persistence, or evicted it under memory pressure). Run Redis with "
                "maxmemory-policy noeviction and appendonly yes, then re-run the item"
            )
        if not isinstance(data, bytes):
            raise ArtifactError(
                f"artifact {digest}: the Redis client decodes responses; "
                "the artifact store needs a bytes client (decode_responses=False)"
            )
        if digest_bytes(data) != digest:
            raise ArtifactError(
                f"artifact {digest} is corrupt in the Redis artifact store ({key}): its "
                f"{len(data)} bytes hash to {digest_bytes(data)}. Delete the key and "
                "re-run the item that produced it"
            )
        return data

    def has_blob(self, digest: str) -> bool:
        """Whether the blob named ``digest`` is in the store."""
        return bool(self.client.exists(_key(digest)))
