"""Decisions about the run as a whole, as events for the run loop to log. Pure.

- :func:`systemic_pause`: after a batch of results, does the run pause because
  ``systemic_threshold`` components of a phase failed the same way?
- :func:`budget_stop`: nothing ready fits the budget and nothing is in flight.
- :func:`poison`: an item failed for good; which items can now never run?
- :func:`run_end`: nothing is left to do; did the run complete or fail?
"""

from __future__ import annotations

from pact_workers.models.work import ItemStatus, Phase, SuspensionKind
from scheduler.events import (
    Event,
    ItemsPoisoned,
    ItemsSuspended,
    RunCompleted,
    RunFailed,
    RunPaused,
)
from scheduler.failures import recent_failures, repeated_errors
from scheduler.state import RunState
from scheduler.state_index import WAITING
from scheduler.systemic import detect_systemic_failure
from scheduler.wavefront import WorkGraph

Key = tuple[str, Phase]


def systemic_pause(state: RunState, threshold: int) -> RunPaused | None:
    """The pause that ``threshold`` components failing alike in one phase call for."""
    for phase, results in recent_failures(state).items():
        pattern = detect_systemic_failure(results, threshold=threshold)
        if pattern is not None:
            where = f"{pattern.pattern_type} on {', '.join(pattern.affected_components)}"
            if pattern.pattern_type == "provider_unreachable":
                # The sample says it all ("the provider is unreachable from this worker:
                # host:port ..."): lead with it.
                reason = f"{pattern.sample_error} (phase {phase.value}: {where})"
            else:
                reason = (
                    f"systemic failure in phase {phase.value}: {where} ({pattern.sample_error})"
                )
            return RunPaused(
                reason=reason,
                recommendation=pattern.recommendation,
                pattern_type=pattern.pattern_type,
                affected_components=pattern.affected_components,
            )
    repeated = repeated_errors(state, threshold)
    if repeated is None:
        return None
    phase, sample, components = repeated
    return RunPaused(
        reason=f"systemic failure in phase {phase.value}: the same error on "
        f"{', '.join(components)} ({sample})",
        recommendation="the same error on every component points at the agent's "
        "configuration (model, credentials, prompt), not at the components: fix it, "
        "then `pact resume` (failed items get a fresh start)",
        pattern_type="repeated_error",
        affected_components=components,
    )


def budget_stop(state: RunState, reason: str) -> list[Event]:
    """Suspend every pending item *far* and fail the run until the budget is raised."""
    pending = [(i.component_id, i.phase) for i in state.items.values() if i.status in WAITING]
    return [
        ItemsSuspended(kind=SuspensionKind.FAR, reason=f"budget: {reason}", items=pending),
        RunFailed(
            reason=f"budget exceeded: {reason}; raise budget_usd or phase_caps in "
            "pact.yaml, then `pact resume`"
        ),
    ]


def poison(state: RunState, graph: WorkGraph, root: Key) -> ItemsPoisoned | None:
    """Every unfinished item that transitively waits on ``root``, which failed for good."""
    downstream = [
        key
        for key in graph.downstream(root)
        if state.item(*key).status not in {ItemStatus.DONE, ItemStatus.FAILED, ItemStatus.POISONED}
    ]
    if not downstream:
        return None
    return ItemsPoisoned(root_component=root[0], root_phase=root[1], items=downstream)


def run_end(state: RunState) -> RunCompleted | RunFailed:
    """Completed when every item is done; else failed, naming what failed or is stuck."""
    if all(i.status is ItemStatus.DONE for i in state.items.values()):
        return RunCompleted()
    failed = [i for i in state.items.values() if i.status is ItemStatus.FAILED]
    if failed:
        reason = "; ".join(
            f"{i.component_id}/{i.phase.value} failed: {i.last_error}" for i in failed
        )
    else:
        stuck = [k for k, i in state.items.items() if i.status in WAITING]
        reason = f"no item can make progress: {', '.join(stuck)}"
    return RunFailed(reason=reason)
