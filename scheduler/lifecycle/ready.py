"""READY: a pending item whose prerequisites are all done, kept by the fold as items move.

Rules:

- An item is ``ready`` when it would be ``pending`` and every work item it waits for
  (:func:`~scheduler.lifecycle.guards.prerequisites`) is done; it goes back to
  ``pending`` when one of them stops being done (a redo). These are the table's rows
  ``prerequisites_met`` and ``prerequisites_unmet`` (by the scheduler); a row whose
  target is ``pending`` ends in ``ready`` when the item's prerequisites are met.
- Incremental: only what a move can change is looked at, the item that moved and,
  when an item enters or leaves ``done``, the items waiting for it (the reverse of the
  prerequisites, built once per state index and extended when a contract declares a
  dependency). At run start every item is looked at once.
- Pure: the state in, the state changed in place; no I/O. A retry time still holds a
  ready item back (the wavefront's business), and ready items may be dispatched,
  suspended, poisoned, reset or cancelled exactly as pending ones.
"""

from __future__ import annotations

from collections.abc import Iterable

from pact_workers.models.work import ItemStatus, Phase
from scheduler.lifecycle.guards import dependencies_met, prerequisites
from scheduler.state import ItemState, RunState, final_phase, item_key
from scheduler.state_index import WAITING

__all__ = ["WAITING", "after_move", "dependency_added", "settle", "settle_all"]


def _move(state: RunState, item: ItemState, status: ItemStatus) -> None:
    state.index.moved(item_key(item.component_id, item.phase), item, status)
    item.status = status


def settle(state: RunState, item: ItemState) -> None:
    """Move ``item`` between pending and ready as its prerequisites say."""
    if item.status not in WAITING:
        return
    met = dependencies_met(state, item, item.attempt)
    if item.status is ItemStatus.PENDING and met:
        _move(state, item, ItemStatus.READY)
    elif item.status is ItemStatus.READY and not met:
        _move(state, item, ItemStatus.PENDING)


def settle_all(state: RunState) -> None:
    """Every item, once (a run that starts)."""
    for item in state.items.values():
        settle(state, item)


def after_move(state: RunState, item: ItemState, old: ItemStatus) -> None:
    """``item`` just moved from ``old``: settle it and, when it entered or left done,
    the items waiting for it."""
    settle(state, item)
    if (old is ItemStatus.DONE) == (item.status is ItemStatus.DONE):
        return
    for key in _dependents(state).get(item_key(item.component_id, item.phase), ()):
        waiting = state.items.get(key)
        if waiting is not None:
            settle(state, waiting)


def dependency_added(state: RunState, component_id: str, dependencies: Iterable[str]) -> None:
    """A contract of ``component_id`` declared ``dependencies`` (already in
    ``state.dependencies``): extend the reverse index, settle the component's items."""
    tree = state.tree
    if tree is None:
        return
    index = state.index.dependents
    touched = [item_key(component_id, p) for p in (Phase.CONTRACT, final_phase(tree, component_id))]
    if index is not None:
        for dep in dependencies:
            if dep not in tree.nodes:
                continue
            edges = [
                (item_key(dep, Phase.CONTRACT), touched[0]),
                (item_key(dep, final_phase(tree, dep)), touched[1]),
            ]
            for prerequisite, key in edges:
                waiting = index.setdefault(prerequisite, [])
                if key not in waiting:
                    waiting.append(key)
    for key in touched:
        item = state.items.get(key)
        if item is not None:
            settle(state, item)


def _dependents(state: RunState) -> dict[str, list[str]]:
    """Item key -> the keys of the items waiting for it (built once per state index)."""
    index = state.index
    if index.dependents is None:
        found: dict[str, list[str]] = {}
        for key, item in state.items.items():
            for prerequisite in prerequisites(state, item.component_id, item.phase):
                found.setdefault(prerequisite, []).append(key)
        index.dependents = found
    return index.dependents
