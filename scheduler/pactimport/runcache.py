"""Offering what a Pact project produced to the harness, in place of an agent's answer.

An imported run's items are served as action-cache hits whose result is the Pact
artifact (``cache: verify`` semantics whatever pact.yaml says: the worker's harness
checks it as it would an agent's answer, and the run checks an imported contract as
it checks every contract). Accepted, the item succeeds at cost 0 and its
``cache_hit`` names the Pact project as its origin; rejected, the hit is dropped and
the agent is asked, as for any item. Items Pact did not produce go to the run's own
action cache, if it has one.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING

from pact_workers.artifacts import ArtifactStore, Bundle
from pact_workers.models.work import Phase, Usage
from scheduler.cache import ActionCache, CacheEntry, CacheMode, RunCache
from scheduler.events import CachedResult
from scheduler.pactimport.manifest import IMPORT_ORIGIN, ImportManifest, read_manifest

if TYPE_CHECKING:
    from scheduler.project import ProjectDir
    from scheduler.state import RunState

__all__ = ["ImportedRunCache", "is_imported", "run_cache_for"]

log = logging.getLogger(__name__)


class _NoCache:
    """The backend of an imported run that has no action cache of its own."""

    name = "none"

    @property
    def location(self) -> str:
        return "nowhere"

    def get(self, key: str) -> CacheEntry | None:
        return None

    def put(self, entry: CacheEntry, files: Mapping[str, bytes]) -> None:
        return None

    def files(self, entry: CacheEntry) -> Bundle:
        return {}


class ImportedRunCache(RunCache):
    """A run's cache that serves the imported artifacts first; see the module docstring."""

    def __init__(
        self, manifest: ImportManifest, cache: ActionCache | None, setting: CacheMode | None
    ) -> None:
        super().__init__(cache if cache is not None else _NoCache(), setting)
        self.manifest = manifest
        self.imported = manifest.by_item()
        self.own = cache is not None

    def offer(
        self, state: RunState, store: ArtifactStore, component_id: str, phase: Phase
    ) -> CachedResult | None:
        """The Pact artifact of this item, unless the harness rejected it already."""
        artifact = self.imported.get((component_id, phase))
        if (
            artifact is None
            or state.item(component_id, phase).cache == "dropped"
            or not self._stored(store, artifact.output)
        ):
            return None
        return CachedResult(
            output=artifact.output, trusted=False, source_run=self.manifest.origin, saved=Usage()
        )

    @staticmethod
    def _stored(store: ArtifactStore, digest: str) -> bool:
        """Put the imported bundle through the run's store (on the fleet that is where
        workers read it: Redis); False when its files are gone (the agent is asked)."""
        try:
            store.put_bundle(store.get_bundle(digest))
        except Exception as exc:  # an import must never fail a run: the agent answers
            log.warning("imported artifact %s cannot be read: %s", digest, exc)
            return False
        return True


def is_imported(hit: CachedResult | None) -> bool:
    """True for a hit that serves an artifact of an imported Pact project."""
    return hit is not None and hit.source_run.startswith(IMPORT_ORIGIN)


def run_cache_for(
    project: ProjectDir, cache: ActionCache | None, setting: CacheMode | None
) -> RunCache | None:
    """The cache a run loop uses: the imported artifacts first when the run imported a
    Pact project, else the run's action cache (None: none)."""
    manifest = read_manifest(project.pact)
    if manifest is not None:
        return ImportedRunCache(manifest, cache, setting)
    return RunCache(cache, setting) if cache is not None else None
