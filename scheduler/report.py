"""Run summaries for people (tables) and machines (``--json``)."""

from __future__ import annotations

from typing import Any

from pact_workers.models.work import ItemStatus
from scheduler.state import ItemState, RunState


def summary_rows(state: RunState) -> list[dict[str, Any]]:
    """One row per component, in dependency order."""
    assert state.tree is not None
    by_component: dict[str, list[ItemState]] = {}
    for item in state.items.values():
        by_component.setdefault(item.component_id, []).append(item)
    rows = []
    for cid in state.tree.topological_order():
        items = by_component[cid]
        final = items[-1]
        tr = final.test_results if final.status is ItemStatus.DONE else None
        if tr is None:
            tr = next((i.test_results for i in reversed(items) if i.test_results), None)
        rows.append(
            {
                "component_id": cid,
                "phases": {i.phase.value: i.status.value for i in items},
                "attempts": {i.phase.value: i.attempt for i in items},
                "tests": f"{tr.passed}/{tr.total}" if tr else "",
                "cost_usd": round(sum(i.usage.cost_usd for i in items), 6),
                "poisoned_by": next((i.poisoned_by for i in items if i.poisoned_by), None),
                "suspension": next(
                    (i.suspension.value for i in items if i.suspension is not None), None
                ),
                "last_error": next((i.last_error for i in reversed(items) if i.last_error), ""),
            }
        )
    return rows


def poisoned_items(state: RunState) -> list[tuple[str, str]]:
    """(item, root cause) for every poisoned item."""
    return [
        (key, item.poisoned_by or "")
        for key, item in state.items.items()
        if item.status is ItemStatus.POISONED
    ]
