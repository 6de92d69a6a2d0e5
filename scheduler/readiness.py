"""The ready set, kept incrementally: what the wavefront rules allow now, in O(affected).

Rules (the same as :mod:`scheduler.wavefront`'s, which owns the graph):

- every work item counts its prerequisites that are not done (``unmet``); an item
  whose count is 0 and whose status is pending (or ready) is a *candidate*;
- when an item becomes done, only its dependents' counts change; when it stops
  being done (never, today, but a reset may), they go up again; a new dependency
  (a contract declared it) adds one edge and, if the prerequisite is not done yet,
  one to the count;
- a candidate whose retry time lies in the future is held back until then;
- in phased mode nothing of a later phase starts while an item of an earlier phase
  is ready or running (a counter per phase); an earlier-phase item that can only
  start after a later-phase one (a leaf that depends on a parent component waits for
  its integration) does not hold the barrier, or the run could never finish;
- the ready list is the candidates in priority order (the upward rank, critical path
  first), cut to the free slots and per-role limits (running counters per role).

Everything here is updated by :meth:`ReadyTracker.set_status` (one item) and
:meth:`ReadyTracker.add_dependency` (one edge). With a slot limit,
:meth:`ReadyTracker.ready` costs O((chosen + passed over) log candidates): the
candidates wait in one heap per phase, ordered by priority, and the best of the heaps'
heads is taken until the free slots are filled (passed over: candidates whose retry
time lies ahead, and the heads of phases whose role is at its limit). Without one it
returns every candidate allowed, sorted: O(candidates log candidates), never O(items).
Priorities are recomputed only when the phase durations they are weighted by change
materially (see :data:`RANK_TOLERANCE`); when they are, the heaps are made again, and
when a new edge raises some, :meth:`ReadyTracker.reprioritise` is told which.
"""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Iterable, Mapping

from pact_workers.models.work import IN_FLIGHT, ROLE_FOR_PHASE, ItemStatus, Phase

Key = tuple[str, Phase]
#: An item's place in the priority order: (-rank, phase order, component id).
Order = tuple[float, int, str]

#: Statuses an item may be dispatched from.
DISPATCHABLE = frozenset({ItemStatus.PENDING, ItemStatus.READY})
#: Statuses after which an item needs nothing more.
TERMINAL = frozenset({ItemStatus.DONE, ItemStatus.FAILED, ItemStatus.POISONED})
#: The phases, in order (iterating the enum itself costs a generator each time).
PHASES = tuple(Phase)
#: Phase barriers for phase-locked scheduling (all contracts, then all tests, ...).
PHASE_RANK = {Phase.CONTRACT: 0, Phase.TEST: 1, Phase.IMPLEMENT: 2, Phase.INTEGRATE: 3}
PHASE_ORDER = PHASE_RANK
#: A phase's observed mean duration must move this much (relatively) from the weight
#: the ranks were computed with before they are computed again.
RANK_TOLERANCE = 0.25


class ReadyTracker:
    """See the module docstring. ``prerequisites`` and ``dependents`` are the graph's
    maps (shared, so that edges added through :meth:`add_dependency` are seen by
    whoever else reads the graph)."""

    def __init__(
        self,
        keys: list[Key],
        prerequisites: Mapping[Key, list[Key]],
        dependents: Mapping[Key, list[Key]],
        *,
        phased: bool = False,
        max_concurrent: int | None = None,
        role_limits: Mapping[str, int] | None = None,
        rank: dict[Key, float] | None = None,
    ) -> None:
        self.keys = keys
        self.prerequisites = prerequisites
        self.dependents = dependents
        self.phased = phased
        self.max_concurrent = max_concurrent
        self.role_limits = dict(role_limits or {})
        self.status: dict[Key, ItemStatus] = dict.fromkeys(keys, ItemStatus.PENDING)
        self.unmet: dict[Key, int] = {k: len(prerequisites[k]) for k in keys}
        self.candidates: dict[Key, None] = {k: None for k in keys if self.unmet[k] == 0}
        self.not_before: dict[Key, float] = {}
        self.running_by_role: Counter[str] = Counter()
        self.running = 0
        self.running_by_rank: Counter[int] = Counter()
        #: Candidates per phase (what holds a phase barrier open).
        self.candidates_by_phase: dict[Phase, int] = dict.fromkeys(Phase, 0)
        for key in self.candidates:
            self.candidates_by_phase[key[1]] += 1
        #: Items not done, failed or poisoned (what ``is_active`` asks about).
        self.unfinished = len(keys)
        #: Per phase, (order, key) of the candidates, least order first; entries of keys
        #: no longer candidates, or whose order changed, are dropped when they surface.
        self._heaps: dict[Phase, list[tuple[Order, Key]]] = {}
        #: The order of each key's live heap entry.
        self._queued: dict[Key, Order] = {}
        self._rank: dict[Key, float] = {} if rank is None else rank
        self._rebuild()

    # -- priorities -------------------------------------------------------------

    @property
    def rank(self) -> dict[Key, float]:
        """Each item's priority (its upward rank: the longest chain from it to the end).
        Changed by assigning a new mapping; one changed in place must be followed by
        :meth:`reprioritise` with the keys changed, or the heaps keep the old order."""
        return self._rank

    @rank.setter
    def rank(self, value: dict[Key, float]) -> None:
        self._rank = value
        self._rebuild()

    def reprioritise(self, keys: Iterable[Key]) -> None:
        """``keys``' ranks were changed in place (raised along a new edge)."""
        if self.max_concurrent is None:
            return  # no heaps without a slot limit: every candidate is returned
        for key in keys:
            if key in self.candidates:
                self._push(key)

    def _order(self, key: Key) -> Order:
        return (-self._rank.get(key, 0.0), PHASE_ORDER[key[1]], key[0])

    def _push(self, key: Key) -> None:
        """A heap entry for candidate ``key`` at its order, unless it has one."""
        order = self._order(key)
        if self._queued.get(key) != order:
            self._queued[key] = order
            heapq.heappush(self._heaps[key[1]], (order, key))

    def _rebuild(self) -> None:
        """The heaps again, from the candidates alone: O(candidates)."""
        self._heaps = {p: [] for p in PHASES}
        if self.max_concurrent is None:
            return
        self._queued = {key: self._order(key) for key in self.candidates}
        for key, order in self._queued.items():
            self._heaps[key[1]].append((order, key))
        for heap in self._heaps.values():
            heapq.heapify(heap)

    def _head(self, phase: Phase) -> tuple[Order, Key] | None:
        """The live entry of ``phase``'s best candidate (stale entries dropped)."""
        heap = self._heaps[phase]
        while heap:
            order, key = heap[0]
            live = self._queued.get(key) == order
            if live and key in self.candidates:
                return heap[0]
            heapq.heappop(heap)
            if live:  # no longer a candidate: pushed again if it becomes one
                del self._queued[key]
        return None

    # -- updates, O(1) or O(dependents) ------------------------------------------

    def set_status(self, key: Key, status: ItemStatus, retry_at: float | None = None) -> None:
        """Record ``key``'s status (and when it may be retried)."""
        old = self.status[key]
        if retry_at is not None:
            self.not_before[key] = retry_at
        else:
            self.not_before.pop(key, None)
        if old is status:
            return
        self.status[key] = status
        role = ROLE_FOR_PHASE[key[1]].value
        rank = PHASE_RANK[key[1]]
        if old in IN_FLIGHT:
            self.running -= 1
            self.running_by_role[role] -= 1
            self.running_by_rank[rank] -= 1
        if status in IN_FLIGHT:
            self.running += 1
            self.running_by_role[role] += 1
            self.running_by_rank[rank] += 1
        if (old in TERMINAL) != (status in TERMINAL):
            self.unfinished += 1 if old in TERMINAL else -1
        if (old is ItemStatus.DONE) != (status is ItemStatus.DONE):
            step = -1 if status is ItemStatus.DONE else 1
            for dependent in self.dependents[key]:
                self.unmet[dependent] += step
                self._recheck(dependent)
        self._recheck(key)

    def add_dependency(self, key: Key, prerequisite: Key) -> None:
        """One more edge, already added to the graph's maps: recount ``key``."""
        if self.status[prerequisite] is not ItemStatus.DONE:
            self.unmet[key] += 1
            self._recheck(key)

    def _recheck(self, key: Key) -> None:
        if self.unmet[key] == 0 and self.status[key] in DISPATCHABLE:
            if key not in self.candidates:
                self.candidates[key] = None
                self.candidates_by_phase[key[1]] += 1
                if self.max_concurrent is not None:
                    self._push(key)
        elif key in self.candidates:
            del self.candidates[key]
            self.candidates_by_phase[key[1]] -= 1

    # -- the decision (see the module docstring for its cost) -----------------------

    def ready(self, now: float | None = None) -> list[Key]:
        """Candidates allowed now, critical path first, cut to free slots and limits."""
        if self.max_concurrent is None:
            return self._all_allowed(now)
        phases = self._open_phases()
        free = self.max_concurrent - self.running
        per_role = Counter(self.running_by_role)
        chosen: list[Key] = []
        taken: list[tuple[Order, Key]] = []
        while len(chosen) < free and phases:
            heads = [(head, p) for p in phases if (head := self._head(p)) is not None]
            if not heads:
                break
            (_, key), phase = min(heads)
            taken.append(heapq.heappop(self._heaps[phase]))
            if now is not None and self.not_before.get(key, 0.0) > now:
                continue
            role = ROLE_FOR_PHASE[phase].value
            limit = self.role_limits.get(role)
            if limit is not None and per_role[role] >= limit:
                phases.remove(phase)  # every candidate of the phase has this role
                continue
            per_role[role] += 1
            chosen.append(key)
        for entry in taken:  # still candidates until their status says otherwise
            heapq.heappush(self._heaps[entry[1][1]], entry)
        return chosen

    def _open_phases(self) -> list[Phase]:
        """The phases whose candidates may start: all of them, or in phased mode those
        up to the earliest phase with a candidate or an item in flight."""
        if not self.phased:
            return list(PHASES)
        live = [PHASE_RANK[p] for p, n in self.candidates_by_phase.items() if n > 0]
        live += [r for r, n in self.running_by_rank.items() if n > 0]
        lowest_open = min(live, default=None)
        return [p for p in PHASES if lowest_open is None or PHASE_RANK[p] <= lowest_open]

    def _all_allowed(self, now: float | None) -> list[Key]:
        """Every candidate allowed now, in priority order (no slot limit)."""
        phases = self._open_phases() if self.phased else PHASES
        allowed = [
            key
            for key in self.candidates
            if (now is None or self.not_before.get(key, 0.0) <= now)
            and (not self.phased or key[1] in phases)
        ]
        allowed.sort(key=self._order)
        per_role = Counter(self.running_by_role)
        chosen: list[Key] = []
        for key in allowed:
            role = ROLE_FOR_PHASE[key[1]].value
            limit = self.role_limits.get(role)
            if limit is not None and per_role[role] >= limit:
                continue
            per_role[role] += 1
            chosen.append(key)
        return chosen

    def is_active(self) -> bool:
        """Anything left that is not done, failed or poisoned."""
        return self.unfinished > 0


def material_change(used: Mapping[Phase, float], observed: Mapping[Phase, float]) -> bool:
    """True when an observed phase mean is new, or moved more than the tolerance."""
    for phase, seconds in observed.items():
        before = used.get(phase)
        if before is None or abs(seconds - before) > RANK_TOLERANCE * max(before, 1e-9):
            return True
    return False
