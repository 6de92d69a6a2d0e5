"""The guards of the transition table: pure predicates of the run state and one event.

The fold checks the guards it can judge from the log alone (:data:`FOLD_GUARDS`).
``can_retry`` and ``budget_left`` depend on settings that may change between
resumes (``max_attempts``, ``budget_usd``): the failure policy and the budget check
evaluate them when they decide, and the event records the decision.
"""

from __future__ import annotations

from collections.abc import Callable

from pact_workers.models.work import ErrorClass, ItemStatus, Phase
from scheduler.lifecycle.table import Guard
from scheduler.state import ItemState, RunState, final_phase


def lease_current(state: RunState, item: ItemState, attempt: int) -> bool:
    """The event is about the item's current attempt (its fencing token)."""
    return attempt == item.attempt


def dependencies_met(state: RunState, item: ItemState, attempt: int) -> bool:
    """Every work item this one waits for is done (the wavefront's prerequisites)."""
    return all(
        key not in state.items or state.items[key].status is ItemStatus.DONE
        for key in prerequisites(state, item.component_id, item.phase)
    )


def not_cancelled(state: RunState, item: ItemState, attempt: int) -> bool:
    """Neither the run nor the item was cancelled (a resume lifts a cancel)."""
    return not state.cancelled and item.status is not ItemStatus.CANCELLED


def can_retry(
    item: ItemState, *, error_class: ErrorClass, max_retries: int, max_attempts: int
) -> bool:
    """Another attempt is allowed after this failure (retries or attempts are left)."""
    if error_class is ErrorClass.TRANSIENT:
        return item.transient_failures < max_retries
    return item.rejections + 1 < max_attempts


def budget_left(spent_usd: float, budget_usd: float | None) -> bool:
    """The run has not spent its budget."""
    return budget_usd is None or spent_usd < budget_usd


def prerequisites(state: RunState, component_id: str, phase: Phase) -> list[str]:
    """Item keys of what ``(component_id, phase)`` waits for, from the state alone.

    The same rules as :class:`scheduler.wavefront.WorkGraph`: a contract waits for its
    dependencies' contracts, tests for their contract, an implementation for its tests
    and its dependencies' final phases, an integration for its children's too.
    """
    tree = state.tree
    if tree is None:
        return []
    deps = [d for d in state.dependencies.get(component_id, []) if d in tree.nodes]
    if phase is Phase.CONTRACT:
        return [f"{d}/{Phase.CONTRACT.value}" for d in deps]
    if phase is Phase.TEST:
        return [f"{component_id}/{Phase.CONTRACT.value}"]
    upstream = [*deps, *tree.nodes[component_id].children] if phase is Phase.INTEGRATE else deps
    return [f"{component_id}/{Phase.TEST.value}"] + [
        f"{d}/{final_phase(tree, d).value}" for d in dict.fromkeys(upstream)
    ]


#: The guards the fold judges on every event, replay included.
FOLD_GUARDS: dict[Guard, Callable[[RunState, ItemState, int], bool]] = {
    Guard.LEASE_CURRENT: lease_current,
    Guard.DEPENDENCIES_MET: dependencies_met,
    Guard.NOT_CANCELLED: not_cancelled,
}
