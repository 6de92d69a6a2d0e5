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
:meth:`ReadyTracker.add_dependency` (one edge); :meth:`ReadyTracker.ready` costs
O(candidates), never O(items). Priorities are recomputed only when the phase
durations they are weighted by change materially (see :data:`RANK_TOLERANCE`).
"""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Mapping

from pact_workers.models.work import IN_FLIGHT, ROLE_FOR_PHASE, ItemStatus, Phase

Key = tuple[str, Phase]

#: Statuses an item may be dispatched from.
DISPATCHABLE = frozenset({ItemStatus.PENDING, ItemStatus.READY})
#: Statuses after which an item needs nothing more.
TERMINAL = frozenset({ItemStatus.DONE, ItemStatus.FAILED, ItemStatus.POISONED})
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
        self.rank: dict[Key, float] = {}
        #: Items not done, failed or poisoned (what ``is_active`` asks about).
        self.unfinished = len(keys)

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
            self.candidates[key] = None
        else:
            self.candidates.pop(key, None)

    # -- the decision, O(candidates) ----------------------------------------------

    def ready(self, now: float | None = None) -> list[Key]:
        """Candidates allowed now, critical path first, cut to free slots and limits."""
        lowest_open = None
        if self.phased:
            live = [PHASE_RANK[k[1]] for k in self.candidates]
            live += [r for r, n in self.running_by_rank.items() if n > 0]
            lowest_open = min(live, default=None)
        allowed = [
            key
            for key in self.candidates
            if (now is None or self.not_before.get(key, 0.0) <= now)
            and not (self.phased and lowest_open is not None and PHASE_RANK[key[1]] > lowest_open)
        ]
        free = None if self.max_concurrent is None else self.max_concurrent - self.running
        if free is not None and free <= 0:
            return []
        rank = self.rank

        def order(k: Key) -> tuple[float, int, str]:
            return (-rank.get(k, 0.0), PHASE_ORDER[k[1]], k[0])

        if free is not None and not self.role_limits and free < len(allowed) // 4:
            ordered = heapq.nsmallest(free, allowed, key=order)
        else:
            ordered = sorted(allowed, key=order)
        per_role = Counter(self.running_by_role)
        chosen: list[Key] = []
        for key in ordered:
            if free is not None and len(chosen) >= free:
                break
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
