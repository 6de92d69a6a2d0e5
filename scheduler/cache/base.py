"""The action cache's interface: three primitive operations, and the modes a run uses.

A backend keeps *entries* (:class:`~scheduler.cache.entry.CacheEntry`: an action key
and the verified result it names) and the files of each result. ``get`` reads an
entry, ``put`` stores the files and then the entry (so that an entry never names
files the cache does not have), ``files`` reads a result's files back. Backends are
siblings: :class:`~scheduler.cache.directory.DirectoryActionCache` (one machine) and
:class:`~scheduler.cache.redis.RedisActionCache` (the fleet).
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Protocol, runtime_checkable

from pact_workers.artifacts import Bundle
from pact_workers.errors import PactError
from scheduler.cache.entry import CacheEntry

__all__ = ["FREE_AGENTS", "ActionCache", "CacheError", "CacheMode", "effective_mode"]


class CacheMode(StrEnum):
    """``cache:`` in pact.yaml."""

    #: Neither read nor written.
    OFF = "off"
    #: A hit skips the agent; the harness verifies the cached result as it would an
    #: agent's answer (a result it rejects is dropped and the agent is asked).
    VERIFY = "verify"
    #: A hit skips the agent and the harness: the result was verified when recorded.
    TRUST = "trust"


#: Agents whose answers cost nothing: a run of theirs uses the cache only when pact.yaml
#: asks for it (``cache: verify`` or ``trust``). The replay agent's scripts say what
#: each attempt does (a failure on attempt 1, a transient error), which a hit would
#: silently skip, and the noop agent measures the fleet itself.
FREE_AGENTS = frozenset({"replay", "noop"})


def effective_mode(setting: CacheMode | str | None, agent: str) -> CacheMode:
    """The mode a run uses: pact.yaml's ``cache:`` when set, else ``verify`` for a real
    agent and ``off`` for the replay and noop agents (see :data:`FREE_AGENTS`)."""
    if setting is not None:
        return CacheMode(setting)
    return CacheMode.OFF if (agent or "replay") in FREE_AGENTS else CacheMode.VERIFY


class CacheError(PactError):
    """The action cache cannot be used as configured (e.g. its directory)."""


@runtime_checkable
class ActionCache(Protocol):
    """Where verified results are kept by action key; see the module docstring."""

    #: ``directory`` or ``redis``.
    name: str

    @property
    def location(self) -> str:
        """Where the entries live, for people (a path, or a Redis URL without secrets)."""
        ...

    def get(self, key: str) -> CacheEntry | None:
        """The entry recorded for ``key``, or None (none, or one that cannot be read)."""
        ...

    def put(self, entry: CacheEntry, files: Mapping[str, bytes]) -> None:
        """Store ``files`` (whose bundle digest is ``entry.output``), then ``entry``;
        an entry already there for the same key is replaced."""
        ...

    def files(self, entry: CacheEntry) -> Bundle:
        """The files of ``entry``'s result.

        Raises:
            ArtifactError: they are gone or corrupt.
        """
        ...
