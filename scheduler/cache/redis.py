"""The action cache in Redis: every run on the fleet shares it.

An entry is a string ``pact:cache:sha256:<hex>`` (see :mod:`pact_workers.fleet.keys`)
holding the entry's JSON. The results' files are the fleet's artifact store itself
(``pact:artifact:<digest>``), where every verified result already is; ``put`` stores
them again before the entry, so an entry never names files Redis does not have,
unless Redis loses them later (a hit whose files are gone is a miss).

An entry and its files are kept for the same time, ``PACT_ARTIFACT_TTL_S`` after
their last write or hit: a hit renews the entry, and the run stores the files it is
served, which renews them. An entry that outlived its files would be a miss that
still took memory.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import redis

from pact_workers.artifacts import ArtifactStore, Bundle
from pact_workers.errors import ArtifactError
from pact_workers.fleet import keys
from pact_workers.fleet.blobs import RedisBlobStore
from pact_workers.fleet.connection import describe
from pact_workers.fleet.wire import read_or_discard
from scheduler.cache.entry import CacheEntry, check_digest

__all__ = ["RedisActionCache"]


class RedisActionCache:
    """An :class:`~scheduler.cache.base.ActionCache` on the fleet's Redis.

    Args:
        client: a bytes (not decoded) client, e.g. from
            :func:`~pact_workers.fleet.connection.redis_from_url`.
        ttl_s: how long an entry is kept after it was last written or hit (None: as
            long as its files, ``PACT_ARTIFACT_TTL_S``).
    """

    name = "redis"

    def __init__(self, client: redis.Redis, *, ttl_s: int | None = None) -> None:
        self.client = client
        blobs = RedisBlobStore(client)
        self.ttl_s = blobs.ttl_s if ttl_s is None else ttl_s
        self.store = ArtifactStore(blobs)

    @property
    def location(self) -> str:
        return describe(self.client)

    @staticmethod
    def _key(key: str) -> str:
        try:
            return keys.action(check_digest(key, "action key"))
        except ValueError as exc:
            raise ArtifactError(str(exc)) from None

    def get(self, key: str) -> CacheEntry | None:
        name = self._key(key)

        def read() -> Any:
            pipe = self.client.pipeline(transaction=False)
            pipe.get(name)
            pipe.expire(name, self.ttl_s)
            return pipe.execute()[0]

        # An entry of another type is no entry: a miss, said once (the key goes).
        raw = read_or_discard(
            self.client, name, read, expected="string", what="an action cache entry"
        )
        if raw is None:
            return None
        return CacheEntry.from_bytes(raw if isinstance(raw, bytes) else str(raw).encode(), key)

    def put(self, entry: CacheEntry, files: Mapping[str, bytes]) -> None:
        digest = self.store.put_bundle(files)
        if digest != entry.output:
            raise ArtifactError(
                f"the files given for cache entry {entry.key} are bundle {digest}, "
                f"not {entry.output}"
            )
        self.client.set(self._key(entry.key), entry.to_bytes(), ex=self.ttl_s)

    def files(self, entry: CacheEntry) -> Bundle:
        return self.store.get_bundle(entry.output)
