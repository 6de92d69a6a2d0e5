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

The graph is built once per run (:class:`WorkGraph`; edges that contracts declare
are added as they come) and the ready set is kept incrementally by
:class:`~scheduler.readiness.ReadyTracker`: the run loop tells the scheduler what
each event changed (:meth:`WavefrontScheduler.observe`) and asking for the ready
set costs O(ready items), not O(items).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from functools import cached_property

from pact_workers.models.tree import DecompositionTree
from pact_workers.models.work import ItemStatus, Phase
from scheduler.events import Event, ItemsPoisoned, ItemsSuspended, ResultDropped, RunResumed
from scheduler.lifecycle.events import RunCancelled
from scheduler.readiness import PHASE_ORDER, ReadyTracker, material_change
from scheduler.state import RunState, final_phase, item_key, phases_for
from scheduler.state_index import WAITING

Key = tuple[str, Phase]


class SchedulingMode(StrEnum):
    WAVEFRONT = "wavefront"
    PHASED = "phased"


#: Expected seconds per phase before any attempt has been observed: the stigmergy run
#: took ~13 minutes per contract; the others are in proportion to their output size.
#: Only the ratios matter: they weight the critical-path priority of ready items.
DEFAULT_PHASE_SECONDS = {
    Phase.CONTRACT: 780.0,
    Phase.TEST: 480.0,
    Phase.IMPLEMENT: 900.0,
    Phase.INTEGRATE: 600.0,
}


@dataclass(frozen=True)
class ComponentState:
    """The status of each of one component's phases (the seed's component_states value)."""

    phases: Mapping[Phase, ItemStatus] = field(default_factory=dict)
    not_before: Mapping[Phase, float] = field(default_factory=dict)

    def status(self, phase: Phase) -> ItemStatus:
        return self.phases.get(phase, ItemStatus.PENDING)


class WorkGraph:
    """The work-item graph of one tree plus its known dependencies; contracts may add
    dependencies as they are written (:meth:`add_dependency`)."""

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
            cid: list(dict.fromkeys(d for d in deps.get(cid, ()) if d in tree.nodes))
            for cid in tree.nodes
        }
        self._ranks: dict[tuple[tuple[str, float], ...], dict[Key, float]] = {}

    @cached_property
    def keys(self) -> list[Key]:
        return [(cid, p) for cid in sorted(self.tree.nodes) for p in phases_for(self.tree, cid)]

    @cached_property
    def prerequisite_map(self) -> dict[Key, list[Key]]:
        return {key: self._prerequisites(*key) for key in self.keys}

    def prerequisites(self, component_id: str, phase: Phase) -> list[Key]:
        return self.prerequisite_map[(component_id, phase)]

    def _prerequisites(self, component_id: str, phase: Phase) -> list[Key]:
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
        for key, pres in self.prerequisite_map.items():
            for pre in pres:
                out[pre].append(key)
        return out

    def add_dependency(self, component_id: str, dependency: str) -> list[tuple[Key, Key]]:
        """Make ``component_id`` depend on ``dependency``; returns the new edges as
        (item, prerequisite) pairs (none when it already did, or is not in the tree)."""
        nodes = self.tree.nodes
        deps = self.dependencies[component_id]
        if dependency == component_id or dependency not in nodes or dependency in deps:
            return []
        deps.append(dependency)
        candidates = [
            ((component_id, Phase.CONTRACT), (dependency, Phase.CONTRACT)),
            (
                (component_id, final_phase(self.tree, component_id)),
                (dependency, final_phase(self.tree, dependency)),
            ),
        ]
        added = []
        for key, pre in candidates:
            if pre not in self.prerequisite_map[key]:
                self.prerequisite_map[key].append(pre)
                self.dependents[pre].append(key)
                added.append((key, pre))
        self._ranks.clear()
        return added

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

    def raise_rank(
        self, rank: dict[Key, float], edge: tuple[Key, Key], weights: Mapping[Phase, float]
    ) -> list[Key]:
        """Update ``rank`` in place for one new edge (item, prerequisite): the
        prerequisite and what leads to it may now head a longer chain. O(affected).
        Returns the items whose rank rose."""
        key, pre = edge
        raised: list[Key] = []
        todo = [(pre, weights[pre[1]] + rank.get(key, weights[key[1]]))]
        while todo:
            item, value = todo.pop()
            if value <= rank.get(item, 0.0):
                continue
            rank[item] = value
            raised.append(item)
            todo.extend((p, weights[p[1]] + value) for p in self.prerequisite_map[item])
        return raised

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
    decision as a pure function of the tree and component states. A run loop keeps
    it in step with its state through :meth:`sync` (once) and :meth:`observe` (per
    event) and asks :meth:`ready_for_state`.
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
        #: Expected seconds per phase the priorities are weighted with; the run loop
        #: feeds in the mean durations it observed, and the priorities are computed
        #: again only when those move materially.
        self.phase_seconds: dict[Phase, float] = {}
        self.tracker = self._new_tracker()

    def _new_tracker(self) -> ReadyTracker:
        return ReadyTracker(
            self.graph.keys,
            self.graph.prerequisite_map,
            self.graph.dependents,
            phased=self.mode is SchedulingMode.PHASED,
            max_concurrent=self.max_concurrent_agents,
            role_limits=self.role_limits,
            rank=self.graph.rank(self.phase_seconds),
        )

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
        tracker = self._new_tracker()
        for cid, p in self.graph.keys:
            cs = component_states.get(cid, ComponentState())
            tracker.set_status((cid, p), cs.status(p), cs.not_before.get(p))
        return [(c, p.value) for c, p in tracker.ready(now)]

    def advance(self, component_id: str, completed_phase: str, result: object = None) -> None:
        """Record a completed phase; downstream items may become ready."""
        self.tracker.set_status((component_id, Phase(completed_phase)), ItemStatus.DONE)

    # -- graphlib-style API over the scheduler's own bookkeeping ---------------

    def get_ready(self) -> list[tuple[str, Phase]]:
        ready = self.tracker.ready(None)
        for key in ready:
            self.tracker.set_status(key, ItemStatus.DISPATCHED)
        return ready

    def done(self, component_id: str, phase: Phase | str) -> None:
        self.advance(component_id, Phase(phase).value)

    def fail(self, component_id: str, phase: Phase | str) -> list[Key]:
        """Fail an item permanently; return (and mark) the items it poisons."""
        key = (component_id, Phase(phase))
        self.tracker.set_status(key, ItemStatus.FAILED)
        poisoned = self.graph.downstream(key)
        for item in poisoned:
            self.tracker.set_status(item, ItemStatus.POISONED)
        return poisoned

    def is_active(self) -> bool:
        return self.tracker.is_active()

    # -- in step with a run's state --------------------------------------------

    def sync(self, state: RunState) -> None:
        """Take every item's status (and the dependencies contracts declared) from a
        folded state: O(items), once, when a run is opened."""
        for cid, deps in state.dependencies.items():
            for dep in deps:
                self.graph.add_dependency(cid, dep)
        self.phase_seconds = state.index.mean_seconds()
        self.tracker = self._new_tracker()
        for item in state.items.values():
            self._take(state, item.component_id, item.phase)

    def observe(self, event: Event, state: RunState) -> None:
        """What ``event`` (already folded into ``state``) changed: O(what it touched)."""
        if isinstance(event, ResultDropped):
            # Changes no item, and may name none of the run's: the drop of a result
            # for an unknown item, written by anyone who can write to the stream.
            return
        cid = getattr(event, "component_id", None)
        phase = getattr(event, "phase", None)
        if cid is not None:
            for dep in state.dependencies.get(cid, ()):
                for edge in self.graph.add_dependency(cid, dep):
                    self.tracker.add_dependency(*edge)
                    raised = self.graph.raise_rank(self.tracker.rank, edge, self._weights())
                    self.tracker.reprioritise(raised)
            if phase is not None:
                self._take(state, cid, phase)
        if isinstance(event, ItemsPoisoned | ItemsSuspended | RunCancelled):
            for item_cid, item_phase in event.items:
                self._take(state, item_cid, item_phase)
        elif isinstance(event, RunResumed):
            for item_cid, item_phase in event.reset_items:
                self._take(state, item_cid, item_phase)

    def _take(self, state: RunState, component_id: str, phase: Phase) -> None:
        item = state.items[item_key(component_id, phase)]
        retry_at = item.retry_at if item.status in WAITING else None
        self.tracker.set_status((component_id, phase), item.status, retry_at)

    def _weights(self) -> dict[Phase, float]:
        return {**DEFAULT_PHASE_SECONDS, **self.phase_seconds}

    def ready_for_state(self, state: RunState, *, now: float) -> list[Key]:
        """The ready set of a state this scheduler was kept in step with."""
        observed = state.index.mean_seconds()
        if material_change(self.phase_seconds, observed):
            self.phase_seconds = observed
            self.tracker.rank = self.graph.rank(observed)
        return self.tracker.ready(now)


def observed_phase_seconds(state: RunState) -> dict[Phase, float]:
    """Mean duration of the finished attempts of each phase (phases with none are left out)."""
    return state.index.mean_seconds()


def keys_of(items: Iterable[Key]) -> list[str]:
    return [item_key(c, p) for c, p in items]
