"""The artifact store's blobs in Redis: ``pact:artifact:<digest>`` -> bytes.

``ArtifactStore(RedisBlobStore(client))`` gives workers on any machine the same
content-addressed store, with Redis as the only thing they share. Blobs expire
``PACT_ARTIFACT_TTL_S`` after they were last written (7 days by default), so that a
fleet's Redis holds what its recent runs use rather than every file any run made.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

import redis
from redis.exceptions import ResponseError

from pact_workers.artifacts import MAX_BLOB_BYTES, digest_bytes
from pact_workers.envvars import whole_number
from pact_workers.errors import ArtifactError
from pact_workers.fleet import keys
from pact_workers.fleet.wire import discard, is_wrong_type, key_type

__all__ = ["RedisBlobStore", "artifact_ttl_s"]

_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")


def artifact_ttl_s(environ: Mapping[str, str] = os.environ) -> int:
    """Seconds an artifact blob stays in Redis after it was last written:
    ``PACT_ARTIFACT_TTL_S``, else :data:`~pact_workers.fleet.keys.ARTIFACT_TTL_S`.

    Raises:
        InputError: the variable is not a whole number of seconds of at least 1.
    """
    return whole_number(
        environ,
        "PACT_ARTIFACT_TTL_S",
        keys.ARTIFACT_TTL_S,
        what="the seconds an artifact stays in Redis after it was last written",
        unset=f"unset: {keys.ARTIFACT_TTL_S}, 7 days",
    )


def _key(digest: str) -> str:
    if not isinstance(digest, str) or not _DIGEST.fullmatch(digest):
        raise ArtifactError(f"malformed artifact digest {digest!r} (expected sha256:<64 hex>)")
    return keys.artifact(digest)


class RedisBlobStore:
    """A :class:`~pact_workers.artifacts.BlobStore` on Redis strings.

    Blobs are immutable and named by their sha256, and a read checks the digest of
    what came back. A write is SET EX: it stores the blob, or renews one that is there
    (its bytes are the same, or were corrupt and are mended), for ``ttl_s`` seconds.

    Args:
        client: a bytes (not decoded) client, e.g. from
            :func:`~pact_workers.fleet.connection.redis_from_url`.
        max_blob_bytes: the largest blob accepted.
        ttl_s: how long a blob is kept after its last write (None:
            :func:`artifact_ttl_s`).
    """

    def __init__(
        self,
        client: redis.Redis,
        *,
        max_blob_bytes: int = MAX_BLOB_BYTES,
        ttl_s: int | None = None,
    ) -> None:
        self.client = client
        self.max_blob_bytes = max_blob_bytes
        self.ttl_s = artifact_ttl_s() if ttl_s is None else ttl_s

    def put_blob(self, data: bytes) -> str:
        """Store ``data`` (or renew it) and return its digest.

        Raises:
            ArtifactError: ``data`` is larger than ``max_blob_bytes``.
        """
        self.check_size(data)
        digest = digest_bytes(data)
        self.client.set(keys.artifact(digest), data, ex=self.ttl_s)
        return digest

    def put_blobs(self, blobs: list[bytes]) -> list[str]:
        """Store several blobs in one round trip (a bundle's files and its manifest)."""
        digests = [digest_bytes(data) for data in blobs]
        self._write(dict(zip(digests, blobs, strict=True)), [])
        return digests

    def put_and_renew(self, blobs: list[bytes], renew: list[str]) -> list[str]:
        """Store ``blobs`` and renew the blobs named ``renew`` for another ``ttl_s``, in
        one round trip; returns those of ``renew`` that Redis no longer has (expired or
        lost), which only a write can bring back."""
        return self._write({digest_bytes(data): data for data in blobs}, renew)

    def _write(self, blobs: dict[str, bytes], renew: list[str]) -> list[str]:
        for data in blobs.values():
            self.check_size(data)
        pipe = self.client.pipeline(transaction=False)
        for digest, data in blobs.items():
            pipe.set(keys.artifact(digest), data, ex=self.ttl_s)
        for digest in renew:
            pipe.expire(_key(digest), self.ttl_s)
            pipe.type(_key(digest))
        replies = pipe.execute()[len(blobs) :]
        gone = []
        for digest, kept, kind in zip(renew, replies[::2], replies[1::2], strict=True):
            # A key of another type is no blob (anyone can write Redis): written again.
            if not kept or self._discarded(_key(digest), kind):
                gone.append(digest)
        return gone

    def _discarded(self, key: str, kind: object = None) -> bool:
        """Whether ``key`` (of Redis type ``kind``, asked when not given) was of another
        type than a blob's, and so deleted, saying so."""
        if kind is not None and (kind.decode() if isinstance(kind, bytes) else kind) in (
            "string",
            "none",
        ):
            return False
        return discard(self.client, key, expected="string", what="an artifact blob's bytes")

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
        try:
            data = self.client.get(key)
        except ResponseError as exc:
            if not is_wrong_type(exc):
                raise
            data = None
        return self._checked(digest, key, data)

    def get_blobs(self, digests: list[str]) -> list[bytes]:
        """Several blobs in one round trip (a bundle's files); see :meth:`get_blob`."""
        if not digests:
            return []
        names = [_key(d) for d in digests]
        values = self.client.mget(names)
        return [self._checked(d, k, v) for d, k, v in zip(digests, names, values, strict=True)]

    def _checked(self, digest: str, key: str, data: object) -> bytes:
        if data is None and self._discarded(key):
            raise ArtifactError(
                f"artifact {digest} was corrupt in the Redis artifact store ({key}): a key "
                "of another type, not a string of its bytes; deleted. A run that needs it "
                "sends it again from its project's artifacts, or runs the item that made "
                "it again"
            )
        if data is None:
            raise ArtifactError(
                f"artifact {digest} is missing from the Redis artifact store ({key}): it "
                "expired (PACT_ARTIFACT_TTL_S after its last write) or was lost (Redis "
                "was flushed, restarted without persistence, or evicted it under memory "
                "pressure: run Redis with maxmemory-policy noeviction and appendonly "
                "yes). A run that needs it again sends it from its project's artifacts, or runs "
                "the item that made it again"
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
        """Whether the blob named ``digest`` is in the store (a key of another type by
        its name is not, and is deleted)."""
        key = _key(digest)
        kind = key_type(self.client, key)
        if kind not in ("string", "none"):
            self._discarded(key, kind)
        return kind == "string"
