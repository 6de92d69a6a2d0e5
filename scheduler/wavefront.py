"""The wavefront: which (component, phase) work items are ready. Pure, no I/O.

Dependency rules (DESIGN: phases and dependency rules):

- ``contract`` of X waits for the contracts of X's dependencies;
- ``test`` of X waits for X's contract;
- ``implement`` of a leaf X waits for X's tests and the finished implementation
  (implement or integrate) of every dependency;
- ``integrate`` of a parent waits for its tests, every child's finished
  implementation and every dependency's.

Ready items are returned critical-path first (longest chain of dependents),
which is what keeps the makespan close to its lower bound. In-flight items are
never returned again, and concurrency limits count running items.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from functools import cached_property

from pact_workers.models.tree import DecompositionTree
from pact_workers.models.work import IN_FLIGHT, ROLE_FOR_PHASE, ItemStatus, Phase
from scheduler.state import RunState, final_phase, item_key, phases_for

Key = tuple[str, Phase]


class SchedulingMode(StrEnum):
    WAVEFRONT = "wavefront"
    PHASED = "phased"


#: Phase barriers for phase-locked scheduling, as Pact ran it: all contracts, then
#: all tests, then all implementations, then the integrations (deepest first, which
#: the dependency rules already impose). No item of a later phase starts before
#: every item of the earlier phases is finished.
PHASE_RANK = {Phase.CONTRACT: 0, Phase.TEST: 1, Phase.IMPLEMENT: 2, Phase.INTEGRATE: 3}

#: Expected seconds per phase before any attempt has been observed: the stigmergy run
#: took ~13 minutes per contract; the others are in proportion to their output size.
#: Only the ratios matter: they weight the critical-path priority of ready items.
DEFAULT_PHASE_SECONDS = {
    Phase.CONTRACT: 780.0,
    Phase.TEST: 480.0,
    Phase.IMPLEMENT: 900.0,
    Phase.INTEGRATE: 600.0,
}
PHASE_ORDER = {Phase.CONTRACT: 0, Phase.TEST: 1, Phase.IMPLEMENT: 2, Phase.INTEGRATE: 3}


@dataclass(frozen=True)
class ComponentState:
    """The status of each of one component's phases (the seed's component_states value)."""

    phases: Mapping[Phase, ItemStatus] = field(default_factory=dict)
    not_before: Mapping[Phase, float] = field(default_factory=dict)

    def status(self, phase: Phase) -> ItemStatus:
        return self.phases.get(phase, ItemStatus.PENDING)


class WorkGraph:
    """The static work-item graph of one tree plus its known dependencies."""

    def __init__(
        self, tree: DecompositionTree, dependencies: Mapping[str, Sequence[str]] | None = None
    ) -> None:
        self.tree = tree
        deps = (
            dependencies
            if dependencies is not None
            else {cid: tree.internal_dependencies(cid) for cid in tree.nodes}
        )
        self.dependencies = {
            cid: [d for d in deps.get(cid, ()) if d in tree.nodes] for cid in tree.nodes
        }
        self._ranks: dict[tuple[tuple[str, float], ...], dict[Key, float]] = {}

    @cached_property
    def keys(self) -> list[Key]:
        return [(cid, p) for cid in sorted(self.tree.nodes) for p in phases_for(self.tree, cid)]

    def prerequisites(self, component_id: str, phase: Phase) -> list[Key]:
        deps = self.dependencies[component_id]
        node = self.tree.nodes[component_id]
        if phase is Phase.CONTRACT:
            return [(d, Phase.CONTRACT) for d in deps]
        if phase is Phase.TEST:
            return [(component_id, Phase.CONTRACT)]
        needed = [(component_id, Phase.TEST)]
        upstream = [*deps, *node.children] if phase is Phase.INTEGRATE else deps
        needed += [(d, final_phase(self.tree, d)) for d in dict.fromkeys(upstream)]
        return needed

    @cached_property
    def dependents(self) -> dict[Key, list[Key]]:
        out: dict[Key, list[Key]] = {k: [] for k in self.keys}
        for key in self.keys:
            for pre in self.prerequisites(*key):
                out[pre].append(key)
        return out

    def rank(self, phase_seconds: Mapping[Phase, float] | None = None) -> dict[Key, float]:
        """Upward rank: expected duration of the longest chain of items from each item
        (itself included) to the end of the run, each item weighted by its phase's
        expected duration. Items on the critical path come first."""
        weights = {**DEFAULT_PHASE_SECONDS, **(phase_seconds or {})}
        cache_key = tuple(sorted((p.value, w) for p, w in weights.items()))
        cached = self._ranks.get(cache_key)
        if cached is not None:
            return cached
        rank: dict[Key, float] = {}
        dependents = self.dependents
        # Depth-first, post-order, without recursion: a chain of thousands of items
        # must not exhaust Python's recursion limit.
        for start in self.keys:
            if start in rank:
                continue
            stack = [(start, iter(dependents[start]))]
            while stack:
                key, pending = stack[-1]
                nxt = next((d for d in pending if d not in rank), None)
                if nxt is None:
                    stack.pop()
                    tail = max((rank[d] for d in dependents[key]), default=0.0)
                    rank[key] = weights[key[1]] + tail
                else:
                    stack.append((nxt, iter(dependents[nxt])))
        self._ranks[cache_key] = rank
        return rank

    def downstream(self, key: Key) -> list[Key]:
        """Every item that transitively waits on ``key`` (what a permanent failure poisons)."""
        seen: dict[Key, None] = {}
        todo = list(self.dependents[key])
        while todo:
            nxt = todo.pop()
            if nxt not in seen:
                seen[nxt] = None
                todo.extend(self.dependents[nxt])
        return sorted(seen, key=lambda k: (k[0], PHASE_ORDER[k[1]]))


class WavefrontScheduler:
    """Dependency-driven fan-out over (component, phase) work items (seed 000, 4.1).

    Shaped like ``graphlib.TopologicalSorter``: :meth:`get_ready` hands out items
    and marks them in flight, :meth:`done` records completion, :meth:`is_active`
    says whether anything is left to do. :meth:`compute_ready_set` is the same
    decision as a pure function of the tree and component states.
    """

    def __init__(
        self,
        tree: DecompositionTree,
        *,
        dependencies: Mapping[str, Sequence[str]] | None = None,
        max_concurrent_agents: int | None = None,
        role_limits: Mapping[str, int] | None = None,
        mode: SchedulingMode | str = SchedulingMode.WAVEFRONT,
    ) -> None:
        self.graph = WorkGraph(tree, dependencies)
        self.max_concurrent_agents = max_concurrent_agents
        self.role_limits = dict(role_limits or {})
        self.mode = SchedulingMode(mode)
        #: Expected seconds per phase that weight the priority; the run loop feeds in
        #: the mean durations it observed, so the estimate improves as the run goes.
        self.phase_seconds: dict[Phase, float] = {}
        self._states: dict[str, dict[Phase, ItemStatus]] = {cid: {} for cid in tree.nodes}

    # -- the seed's API -------------------------------------------------------

    def compute_ready_set(
        self,
        tree: DecompositionTree,
        component_states: Mapping[str, ComponentState],
        *,
        now: float | None = None,
    ) -> list[tuple[str, str]]:
        """Return (component_id, phase) pairs ready to execute, critical path first."""
        if tree is not self.graph.tree:
            self.graph = WorkGraph(tree, self.graph.dependencies)
        statuses = {
            (cid, p): component_states.get(cid, ComponentState()).status(p)
            for cid, p in self.graph.keys
        }
        not_before = {
            (cid, p): t for cid, cs in component_states.items() for p, t in cs.not_before.items()
        }
        return [(c, p.value) for c, p in self._ready(statuses, not_before, now)]

    def advance(self, component_id: str, completed_phase: str, result: object = None) -> None:
        """Record a completed phase; downstream items may become ready."""
        self._states[component_id][Phase(completed_phase)] = ItemStatus.DONE

    # -- graphlib-style API over the scheduler's own bookkeeping ---------------

    def get_ready(self) -> list[tuple[str, Phase]]:
        ready = self._ready(self._statuses(), {}, None)
        for cid, phase in ready:
            self._states[cid][phase] = ItemStatus.DISPATCHED
        return ready

    def done(self, component_id: str, phase: Phase | str) -> None:
        self.advance(component_id, Phase(phase).value)

    def fail(self, component_id: str, phase: Phase | str) -> list[Key]:
        """Fail an item permanently; return (and mark) the items it poisons."""
        key = (component_id, Phase(phase))
        self._states[component_id][key[1]] = ItemStatus.FAILED
        poisoned = self.graph.downstream(key)
        for cid, p in poisoned:
            self._states[cid][p] = ItemStatus.POISONED
        return poisoned

    def is_active(self) -> bool:
        statuses = self._statuses()
        return any(
            s not in {ItemStatus.DONE, ItemStatus.FAILED, ItemStatus.POISONED}
            for s in statuses.values()
        )

    def _statuses(self) -> dict[Key, ItemStatus]:
        return {
            (cid, p): self._states[cid].get(p, ItemStatus.PENDING) for cid, p in self.graph.keys
        }

    # -- the decision itself ---------------------------------------------------

    def ready_for_state(self, state: RunState, *, now: float) -> list[Key]:
        """The ready set for a folded :class:`RunState` (what the run loop calls)."""
        if state.dependencies != self.graph.dependencies:
            self.graph = WorkGraph(self.graph.tree, state.dependencies)
        self.phase_seconds = observed_phase_seconds(state)
        statuses = {(i.component_id, i.phase): i.status for i in state.items.values()}
        not_before = {
            (i.component_id, i.phase): i.retry_at
            for i in state.items.values()
            if i.retry_at is not None
        }
        return self._ready(statuses, not_before, now)

    def _ready(
        self,
        statuses: Mapping[Key, ItemStatus],
        not_before: Mapping[Key, float],
        now: float | None,
    ) -> list[Key]:
        open_rank = self._lowest_open_rank(statuses) if self.mode is SchedulingMode.PHASED else None
        candidates = []
        for key in self.graph.keys:
            if statuses.get(key, ItemStatus.PENDING) not in {ItemStatus.PENDING, ItemStatus.READY}:
                continue
            if now is not None and not_before.get(key, 0.0) > now:
                continue
            if open_rank is not None and PHASE_RANK[key[1]] > open_rank:
                continue
            if all(statuses.get(pre) is ItemStatus.DONE for pre in self.graph.prerequisites(*key)):
                candidates.append(key)
        rank = self.graph.rank(self.phase_seconds)
        candidates.sort(key=lambda k: (-rank[k], PHASE_ORDER[k[1]], k[0]))
        return self._limit(candidates, statuses)

    def _limit(self, candidates: list[Key], statuses: Mapping[Key, ItemStatus]) -> list[Key]:
        running = [k for k, s in statuses.items() if s in IN_FLIGHT]
        per_role: dict[str, int] = {}
        for _, phase in running:
            role = ROLE_FOR_PHASE[phase].value
            per_role[role] = per_role.get(role, 0) + 1
        free = (
            None
            if self.max_concurrent_agents is None
            else self.max_concurrent_agents - len(running)
        )
        chosen: list[Key] = []
        for key in candidates:
            if free is not None and len(chosen) >= free:
                break
            role = ROLE_FOR_PHASE[key[1]].value
            limit = self.role_limits.get(role)
            if limit is not None and per_role.get(role, 0) >= limit:
                continue
            per_role[role] = per_role.get(role, 0) + 1
            chosen.append(key)
        return chosen

    @staticmethod
    def _lowest_open_rank(statuses: Mapping[Key, ItemStatus]) -> int:
        finished = {ItemStatus.DONE, ItemStatus.FAILED, ItemStatus.POISONED, ItemStatus.CANCELLED}
        open_ranks = [PHASE_RANK[p] for (_, p), s in statuses.items() if s not in finished]
        return min(open_ranks, default=max(PHASE_RANK.values()))


def observed_phase_seconds(state: RunState) -> dict[Phase, float]:
    """Mean duration of the finished attempts of each phase (phases with none are left out)."""
    totals: dict[Phase, list[float]] = {}
    for item in state.items.values():
        if item.status is ItemStatus.DONE and item.duration_s > 0:
            totals.setdefault(item.phase, []).append(item.duration_s)
    return {phase: sum(v) / len(v) for phase, v in totals.items()}


def keys_of(items: Iterable[Key]) -> list[str]:
    return [item_key(c, p) for c, p in items]
