"""A blob store in two tiers: a local directory in front of the fleet's Redis store.

The scheduler writes every blob to both (workers read from Redis) and reads
locally first, so a run's verified artifacts survive Redis losing its data.

A run loop's store is ``deferred``: what it writes goes to Redis at the next
:meth:`TieredBlobStore.sync`, all in one round trip, together with the local tier's
durability. The run loop syncs before it commits the events that name the blobs, and
sends a task only after that commit, so no worker looks for a blob that is not there.

Blobs in Redis expire (``PACT_ARTIFACT_TTL_S`` after their last write). What a task
names that the scheduler did not just write (a contract, a test suite) it *refreshes*:
the sync renews it in Redis with the writes, and writes it again from the local tier
only if Redis no longer has it.

A local copy that reads corrupt (a bit flipped on disk, a file cut short) is
replaced by Redis's copy when Redis has a good one.
"""

from __future__ import annotations

import logging

from pact_workers.artifacts import BlobStore, digest_bytes
from pact_workers.errors import ArtifactError, CorruptArtifact

log = logging.getLogger(__name__)


class TieredBlobStore:
    def __init__(self, local: BlobStore, remote: BlobStore, *, deferred: bool = False) -> None:
        self.local, self.remote = local, remote
        self.deferred = deferred
        #: Blobs written locally and not yet to Redis (``deferred``), by digest.
        self._unsent: dict[str, bytes] = {}
        #: Blobs to renew in Redis at the next sync (``deferred``).
        self._renew: dict[str, None] = {}

    def put_blob(self, data: bytes) -> str:
        return self.put_blobs([data])[0]

    def put_blobs(self, blobs: list[bytes]) -> list[str]:
        """Several blobs: each locally, and to Redis in one round trip where it can (at
        the next :meth:`sync`, when ``deferred``)."""
        check = getattr(self.remote, "check_size", None)
        for data in blobs:
            if check is not None:
                check(data)  # refused now, not at the sync
            self.local.put_blob(data)
        if self.deferred:
            digests = [digest_bytes(data) for data in blobs]
            self._unsent.update(zip(digests, blobs, strict=True))
            return digests
        return self._send(blobs)

    def _send(self, blobs: list[bytes]) -> list[str]:
        put_many = getattr(self.remote, "put_blobs", None)
        if put_many is not None:
            return list(put_many(blobs))
        return [self.remote.put_blob(data) for data in blobs]

    def get_blobs(self, digests: list[str]) -> list[bytes]:
        """Several blobs: local ones from disk, the rest from Redis in one round trip."""
        found: dict[str, bytes] = {}
        missing: list[str] = []
        for digest in dict.fromkeys(digests):
            data = self._local_copy(digest)
            if data is None:
                missing.append(digest)
            else:
                found[digest] = data
        if missing:
            get_many = getattr(self.remote, "get_blobs", None)
            fetched = get_many(missing) if get_many is not None else None
            for digest, data in zip(
                missing, fetched or [self.remote.get_blob(d) for d in missing], strict=True
            ):
                self.local.put_blob(data)
                found[digest] = data
        return [found[d] for d in digests]

    def fetch(self, digests: list[str]) -> dict[str, bytes]:
        """Bring the blobs the local tier lacks from Redis, in one round trip; returns
        those fetched (the others were there already).

        Raises:
            ArtifactError: one is missing from Redis too, or corrupt there.
        """
        missing = [d for d in dict.fromkeys(digests) if not self.local.has_blob(d)]
        if not missing:
            return {}
        get_many = getattr(self.remote, "get_blobs", None)
        fetched = get_many(missing) if get_many is not None else None
        got = dict(zip(missing, fetched or [self.remote.get_blob(d) for d in missing], strict=True))
        for data in got.values():
            self.local.put_blob(data)
        return got

    def get_blob(self, digest: str) -> bytes:
        data = self._local_copy(digest)
        if data is not None:
            return data
        data = self.remote.get_blob(digest)
        self.local.put_blob(data)
        return data

    def _local_copy(self, digest: str) -> bytes | None:
        """The local tier's copy, or None when it has none. A copy that reads corrupt
        is written again from Redis's, and those bytes are returned.

        Raises:
            CorruptArtifact: the local copy is corrupt and Redis has no good one.
        """
        if not self.local.has_blob(digest):
            return None
        try:
            return self.local.get_blob(digest)
        except CorruptArtifact as corrupt:
            try:
                data = self.remote.get_blob(digest)
            except ArtifactError as lost:
                raise CorruptArtifact(f"{corrupt}, and Redis has no good copy: {lost}") from None
            getattr(self.local, "mend_blob", self.local.put_blob)(data)
            log.warning("%s: written again from the Redis artifact store's copy", corrupt)
            return data

    def _held(self, digest: str) -> bytes:
        """The local tier's copy (mended from Redis if corrupt), or its refusal."""
        data = self._local_copy(digest)
        return self.local.get_blob(digest) if data is None else data

    def refresh_blobs(self, digests: list[str]) -> None:
        """Make sure Redis has blobs the scheduler holds, for another TTL (workers read
        them there, and they may have expired or been lost since): renewed where Redis
        has them, written again from the local tier where not; at the next
        :meth:`sync` when ``deferred``. Those the local tier lacks are fetched first.

        Raises:
            ArtifactError: a blob neither tier has.
        """
        wanted = list(dict.fromkeys(digests))
        absent = [d for d in wanted if not self.local.has_blob(d)]
        if absent:
            self.get_blobs(absent)
        if self.deferred:
            self._renew.update(dict.fromkeys(wanted))
        else:
            self._write([], wanted)

    def _write(self, blobs: list[bytes], renew: list[str]) -> None:
        """Send ``blobs`` to Redis and renew ``renew`` there, in one round trip where the
        remote store can; what Redis lost is then written again from the local tier."""
        put_and_renew = getattr(self.remote, "put_and_renew", None)
        if put_and_renew is None:  # a remote store without expiry: write them all
            self._send([*blobs, *(self._held(d) for d in renew)])
            return
        gone = put_and_renew(blobs, renew)
        if gone:
            self._send([self._held(d) for d in gone])

    def has_blob(self, digest: str) -> bool:
        return self.local.has_blob(digest) or self.remote.has_blob(digest)

    def sync(self) -> None:
        """Make the local tier's deferred writes durable (Redis keeps its own), send the
        blobs Redis does not have yet, and renew those refreshed since the last sync."""
        sync = getattr(self.local, "sync", None)
        if sync is not None:
            sync()
        unsent, self._unsent = self._unsent, {}
        renew, self._renew = [d for d in self._renew if d not in unsent], {}
        if not (unsent or renew):
            return
        try:
            self._write(list(unsent.values()), renew)
        except BaseException:
            # Redis stayed away past the client's retries: the next sync sends them.
            self._unsent = {**unsent, **self._unsent}
            self._renew = {**dict.fromkeys(renew), **self._renew}
            raise
