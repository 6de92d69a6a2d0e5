"""Run summaries for people (tables) and machines (``--json``)."""

from __future__ import annotations

from typing import Any

from pact_workers.models.work import ItemStatus, Phase
from scheduler.state import PHASE_VALUES, ItemState, RunState


def summary_rows(state: RunState) -> list[dict[str, Any]]:
    """One row per component, in dependency order."""
    assert state.tree is not None
    by_component: dict[str, list[ItemState]] = {}
    for item in state.items.values():
        by_component.setdefault(item.component_id, []).append(item)
    rows = []
    for cid in state.tree.topological_order():
        items = by_component[cid]
        phases: dict[str, str] = {}
        attempts: dict[str, int] = {}
        cost = 0.0
        poisoned_by = suspension = None
        for i in items:
            phase = _VALUE[i.phase]
            phases[phase] = _VALUE[i.status]
            attempts[phase] = i.attempt
            cost += i.usage.cost_usd
            poisoned_by = poisoned_by or i.poisoned_by or None
            if suspension is None and i.suspension is not None:
                suspension = i.suspension.value
        final = items[-1]
        tr = final.test_results if final.status is ItemStatus.DONE else None
        if tr is None:
            tr = next((i.test_results for i in reversed(items) if i.test_results), None)
        rows.append(
            {
                "component_id": cid,
                "phases": phases,
                "attempts": attempts,
                "tests": f"{tr.passed}/{tr.total}" if tr else "",
                "cost_usd": round(cost, 6),
                "poisoned_by": poisoned_by,
                "suspension": suspension,
                "last_error": next((i.last_error for i in reversed(items) if i.last_error), ""),
            }
        )
    return rows


# Enum ``.value`` goes through a descriptor; a status table reads it 60,000 times at
# 10,000 components.
_VALUE: dict[Phase | ItemStatus | str, str] = {
    **PHASE_VALUES,
    **{status: status.value for status in ItemStatus},
}


def poisoned_items(state: RunState) -> list[tuple[str, str]]:
    """(item, root cause) for every poisoned item."""
    return [
        (key, item.poisoned_by or "")
        for key, item in state.items.items()
        if item.status is ItemStatus.POISONED
    ]
