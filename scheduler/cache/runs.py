"""The action cache as one run uses it: a lookup per dispatch, an entry per success.

:class:`RunCache` wraps a backend for the run loop (:class:`scheduler.run.RunController`):
:meth:`RunCache.look_up` gives each dispatch its action key and, on a hit, the cached
result (its files copied into the run's artifact store first, so that the worker and
the promotion find them there); :meth:`RunCache.entry` and :meth:`RunCache.record`
write an accepted result once the run's log holds its success. Nothing here ever fails
a run: a cache that cannot be read is a miss and one that cannot be written stays as
it was, both logged.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pact_workers.artifacts import ArtifactStore
from pact_workers.models.environment import EnvironmentSpec
from pact_workers.models.testing import TestResults
from pact_workers.models.work import ROLE_FOR_PHASE, Phase, ResultMessage
from scheduler.cache.base import ActionCache, CacheError, CacheMode, effective_mode
from scheduler.cache.entry import CacheEntry
from scheduler.cache.key import KeyBasis, action_key, key_basis
from scheduler.events import CachedResult

if TYPE_CHECKING:
    from scheduler.state import RunState

__all__ = ["CacheReport", "RunCache", "cache_report"]

log = logging.getLogger(__name__)


class RunCache:
    """One run's use of an :class:`~scheduler.cache.base.ActionCache`.

    Args:
        cache: the backend.
        setting: pact.yaml's ``cache:`` (None: the default for the run's agent).
    """

    #: Whether the backend is the run's own action cache (a subclass that only
    #: :meth:`offer` s results has none: no action key is computed then).
    own = True

    def __init__(self, cache: ActionCache, setting: CacheMode | None) -> None:
        self.cache = cache
        self.setting = setting
        self._basis: tuple[tuple[str, ...], KeyBasis | None] | None = None

    def mode(self, agent: str) -> CacheMode:
        return effective_mode(self.setting, agent)

    def basis(self, state: RunState, environment: EnvironmentSpec) -> KeyBasis | None:
        """The run's key basis (None: its agent cannot be identified; no cache then).
        Built again only when a resume changed the agent."""
        ident = (
            state.agent,
            json.dumps(state.agent_options, sort_keys=True),
            state.sandbox,
            environment.model_dump_json(),
        )
        if self._basis is None or self._basis[0] != ident:
            try:
                basis: KeyBasis | None = key_basis(
                    state.agent,
                    state.agent_options,
                    environment=environment,
                    sandbox=state.sandbox,
                )
            except CacheError as exc:
                log.warning("run %s goes without the action cache: %s", state.run_id, exc)
                basis = None
            self._basis = (ident, basis)
        return self._basis[1]

    def offer(
        self, state: RunState, store: ArtifactStore, component_id: str, phase: Phase
    ) -> CachedResult | None:
        """A result served before the action cache is asked (none here)."""
        return None

    def look_up(
        self,
        state: RunState,
        store: ArtifactStore,
        component_id: str,
        phase: Phase,
        *,
        inputs: Mapping[str, str],
        verify_inputs: Mapping[str, str],
        environment: EnvironmentSpec,
    ) -> tuple[str, CachedResult | None]:
        """(the item's action key, the hit it may serve): ("", None) when the run does
        not use the cache, (key, None) on a miss or when a hit of this item was
        dropped earlier in the run; ("", the result) when :meth:`offer` serves it."""
        offered = self.offer(state, store, component_id, phase)
        if offered is not None or not self.own:
            return "", offered
        mode = self.mode(state.agent)
        basis = self.basis(state, environment) if mode is not CacheMode.OFF else None
        if basis is None or state.tree is None:
            return "", None
        key = action_key(
            basis,
            tree=state.tree,
            dependencies=state.dependencies,
            component_id=component_id,
            phase=phase,
            inputs=inputs,
            verify_inputs=verify_inputs,
        )
        if state.item(component_id, phase).cache == "dropped":
            return key, None
        try:
            entry = self.cache.get(key)
            if entry is None or (entry.component_id, entry.phase) != (component_id, phase):
                return key, None
            if store.put_bundle(self.cache.files(entry)) != entry.output:
                log.warning("action cache entry %s: its files are not its result", key)
                return key, None
        except Exception as exc:  # an optimisation must never fail a run
            log.warning("action cache lookup of %s/%s failed: %s", component_id, phase, exc)
            return key, None
        trusted = mode is CacheMode.TRUST
        return key, CachedResult(
            output=entry.output,
            trusted=trusted,
            source_run=entry.run_id,
            saved=entry.usage,
            saved_s=entry.duration_s,
            test_results=entry.test_results if trusted else None,
        )

    def entry(
        self,
        state: RunState,
        result: ResultMessage,
        *,
        key: str,
        files: list[str],
        test_results: TestResults | None,
    ) -> CacheEntry:
        """The entry for a result the harness accepted (``test_results``: what it
        measured, a contract's import probe included)."""
        agent = state.agent or "replay"
        basis = self._basis[1] if self._basis is not None else None
        if basis is not None:
            served = basis.roles[ROLE_FOR_PHASE[result.phase]]["agent"]
            agent = " ".join(str(served.get(k) or "") for k in ("backend", "model")).strip()
        return CacheEntry(
            key=key,
            output=result.output or "",
            component_id=result.component_id,
            phase=result.phase,
            files=files,
            test_results=test_results,
            usage=result.usage,
            duration_s=result.duration_s,
            run_id=state.run_id,
            agent=agent,
        )

    def record(self, entry: CacheEntry, store: ArtifactStore) -> None:
        """Store ``entry`` and its files (read from the run's store); never raises."""
        try:
            self.cache.put(entry, store.get_bundle(entry.output))
        except Exception as exc:  # an optimisation must never fail a run
            log.warning(
                "could not record %s/%s in the action cache (%s): %s",
                entry.component_id,
                entry.phase.value,
                self.cache.location,
                exc,
            )


@dataclass(frozen=True)
class CacheReport:
    """What the action cache did for a run (``pact status``)."""

    mode: CacheMode
    hits: int
    dropped: int
    #: What producing the served results cost where they were recorded.
    saved_usd: float
    saved_tokens: int
    #: ``component/phase`` -> ``hit`` or ``dropped``, for every item the cache served
    #: or whose cached result was dropped.
    items: dict[str, str]

    def to_json(self) -> dict[str, object]:
        return {
            "mode": self.mode.value,
            "hits": self.hits,
            "dropped": self.dropped,
            "saved_usd": round(self.saved_usd, 6),
            "saved_tokens": self.saved_tokens,
            "items": self.items,
        }


def cache_report(state: RunState) -> CacheReport:
    """What the action cache did for ``state``'s run: its mode (as the run started),
    hits, dropped hits, what the hits saved, and the items it concerned."""
    setting = state.settings.get("cache")
    hits = [item for item in state.items.values() if item.cache == "hit"]
    return CacheReport(
        mode=effective_mode(setting if isinstance(setting, str) else None, state.agent),
        hits=len(hits),
        dropped=sum(1 for item in state.items.values() if item.cache == "dropped"),
        saved_usd=sum(item.saved.cost_usd for item in hits),
        saved_tokens=sum(item.saved.input_tokens + item.saved.output_tokens for item in hits),
        items={key: item.cache for key, item in state.items.items() if item.cache},
    )
