"""The fold: run state made from the audit log's events, one event at a time.

``fold(events)`` is the only way state is made; ``apply`` is one step of it.
Applying an event whose ``seq`` is not newer than the state's is a no-op, so
replaying a log prefix twice can never double-count a result or a cost. Every
change of an item's status goes through ``_set_status`` (and of its retry time
through ``_set_retry``), which keeps the state's indexes right.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from pact_workers.models.tree import DecompositionTree
from pact_workers.models.work import (
    IN_FLIGHT,
    ErrorClass,
    FailureNote,
    ItemStatus,
    Phase,
    SuspensionKind,
    Usage,
)
from scheduler import lifecycle
from scheduler.events import (
    ArtifactsPromoted,
    CacheDropped,
    CacheHit,
    ContractChecked,
    Event,
    ItemDispatched,
    ItemFailed,
    ItemsPoisoned,
    ItemsSuspended,
    ItemSucceeded,
    ResultDropped,
    RunCompleted,
    RunFailed,
    RunPaused,
    RunResumed,
    RunStarted,
)
from scheduler.gates.transitions import GATE_TRANSITIONS, gate_dispatched
from scheduler.interview.recorded import PLANNING_PHASES, InterviewRecorded
from scheduler.lifecycle import ready
from scheduler.lifecycle.events import ItemProgress, RunCancelled
from scheduler.lifecycle.transitions import item_progress, resumed, run_cancelled
from scheduler.regression.events import RegressionChecked
from scheduler.state import (
    INTERRUPTED,
    ContractValidation,
    ItemState,
    RunState,
    RunStatus,
    item_key,
    phases_for,
)


def fold(events: Iterable[Event], state: RunState | None = None) -> RunState:
    state = state if state is not None else RunState()
    for event in events:
        apply(state, event)
    return state


def apply(state: RunState, event: Event) -> RunState:
    """Apply one event in place (and return the state); stale events are ignored."""
    if event.seq and event.seq <= state.last_seq:
        return state
    # The lifecycle table decides which moves are legal (it raises otherwise), and
    # the handler's result must be the row's target.
    checked = lifecycle.check(state, event)
    _APPLY[type(event)](state, event)
    lifecycle.confirm(event, checked)
    if event.seq:
        state.last_seq = event.seq
        component = getattr(event, "component_id", None)
        phase = getattr(event, "phase", None)
        if component is not None and phase is not None:
            key = item_key(component, phase)
            if key in state.items:
                state.items[key].updated_seq = event.seq
    # Right after a resume the phase is the one the resume chose; otherwise derived.
    state.phase = (
        event.resume_phase
        if isinstance(event, RunResumed) and event.resume_phase
        else derive_phase(state)
    )
    return state


PACT_PHASE_ORDER = ["interview", "decompose", "contract", "implement", "integrate", "complete"]


def derive_phase(state: RunState) -> str:
    """The earliest Pact phase that still has unfinished items ('complete' when none)."""
    if state.status is RunStatus.COMPLETED:
        return "complete"
    open_phases = [phase for phase, n in state.index.open_by_pact_phase.items() if n > 0]
    if not open_phases:
        return "complete" if state.items else "contract"
    return min(open_phases, key=PACT_PHASE_ORDER.index)


def _set_status(state: RunState, item: ItemState, status: ItemStatus) -> None:
    """Every status change goes through here, so that the indexes stay right."""
    old = item.status
    state.index.moved(item_key(item.component_id, item.phase), item, status)
    item.status = status
    ready.after_move(state, item, old)  # pending <-> ready, here and for its dependents


def _set_retry(state: RunState, item: ItemState, retry_at: float | None) -> None:
    """Every change of ``retry_at`` goes through here (the index of waiting items)."""
    item.retry_at = retry_at
    key = item_key(item.component_id, item.phase)
    if retry_at is not None and item.status in ready.WAITING:
        state.index.retry_at[key] = retry_at
    else:
        state.index.retry_at.pop(key, None)


def _run_started(state: RunState, e: RunStarted) -> None:
    tree = DecompositionTree.model_validate(e.tree)
    state.run_id = e.run_id
    state.tree = tree
    state.settings = dict(e.settings)
    state.agent = e.agent
    state.agent_options = dict(e.agent_options)
    state.sandbox = e.sandbox
    state.status = RunStatus.ACTIVE
    for cid in tree.topological_order():
        state.dependencies[cid] = tree.internal_dependencies(cid)
        for phase in phases_for(tree, cid):
            state.items[item_key(cid, phase)] = ItemState(component_id=cid, phase=phase)
    state.reindex()
    ready.settle_all(state)


def _dispatched(state: RunState, e: ItemDispatched) -> None:
    item = state.item(e.component_id, e.phase)
    _set_status(state, item, ItemStatus.DISPATCHED)
    item.attempt = e.attempt
    _set_retry(state, item, None)
    item.suspension = None
    item.suspension_reason = ""
    item.action_key = e.action_key
    item.cached = e.cached
    item.verify_closure = e.verify_inputs.get("deps_src", "")
    gate_dispatched(item, e.gate, e.stage)


def _succeeded(state: RunState, e: ItemSucceeded) -> None:
    item = state.item(e.component_id, e.phase)
    _set_status(state, item, ItemStatus.DONE)
    state.index.finished_attempts[e.phase] += 1
    item.output = e.output
    item.cached = None
    item.files = list(e.files)
    item.test_results = e.test_results
    item.duration_s = e.duration_s
    item.model, item.worker = e.model, e.worker
    item.accepted_usage, item.accepted_at = e.usage, e.ts
    if e.duration_s > 0:
        state.index.add_duration(e.phase, e.duration_s)
    item.last_error = ""
    _spend(state, item, e.phase, e.usage)
    if e.discovered_dependencies:
        known = state.dependencies.setdefault(e.component_id, [])
        known.extend(d for d in e.discovered_dependencies if d not in known)
    if e.external_dependencies:
        state.external_dependencies[e.component_id] = list(e.external_dependencies)


def _failed(state: RunState, e: ItemFailed) -> None:
    item = state.item(e.component_id, e.phase)
    if item.cached is not None and e.attempt == item.attempt:
        # The worker asked the agent after the harness rejected the cached result (a
        # permanent failure is the agent's); a transient one says nothing about it.
        if e.error_class is ErrorClass.PERMANENT:
            item.cache = "dropped"
        item.cached = None
    item.last_error = e.error
    item.last_error_class = e.error_class
    item.last_error_type = e.error_type
    item.test_results = e.test_results
    item.failed_seq = e.seq
    state.index.finished_attempts[e.phase] += 1
    if e.seq > state.resumed_seq:
        state.index.failing[item_key(e.component_id, e.phase)] = None
    _spend(state, item, e.phase, e.usage)
    if e.suspension is SuspensionKind.WILD:
        item.wild_count += 1
    if e.error_type == INTERRUPTED:
        pass  # the scheduler stopped, not the attempt: no retry budget is used
    elif e.error_class is ErrorClass.TRANSIENT:
        item.transient_failures += 1
    else:
        item.rejections += 1
        details = e.test_results.failure_details if e.test_results else []
        item.failures.append(
            FailureNote(
                attempt=e.attempt,
                summary=e.error,
                failing_tests=[(f.test_id, f.error_message) for f in details],
                output=e.output,
            )
        )
    item.suspension = e.suspension
    item.suspension_reason = e.error if e.suspension else ""
    if e.decision == "retry":
        _set_status(state, item, ItemStatus.PENDING)
        _set_retry(state, item, e.retry_at)
        if e.suspension is None and e.retry_at is not None and e.error_type != INTERRUPTED:
            item.suspension = SuspensionKind.NEAR
            item.suspension_reason = "waiting to retry"
    elif e.decision == "pause":
        _set_status(state, item, ItemStatus.PENDING)
        _set_retry(state, item, None)
    else:
        _set_status(state, item, ItemStatus.FAILED)


def _contract_checked(state: RunState, e: ContractChecked) -> None:
    if e.findings or e.corrections:
        state.validation[e.component_id] = ContractValidation(
            attempt=e.attempt,
            accepted=e.accepted,
            findings=list(e.findings),
            corrections=list(e.corrections),
        )
    else:
        state.validation.pop(e.component_id, None)
    if e.waits_for:
        known = state.dependencies.setdefault(e.component_id, [])
        known.extend(d for d in e.waits_for if d not in known)
        ready.dependency_added(state, e.component_id, e.waits_for)


def _cache_hit(state: RunState, e: CacheHit) -> None:
    item = state.item(e.component_id, e.phase)
    item.cache = "hit"
    item.saved = e.saved


def _cache_dropped(state: RunState, e: CacheDropped) -> None:
    item = state.item(e.component_id, e.phase)
    item.cache = "dropped"
    if item.attempt != e.attempt:
        return
    item.cached = None
    if e.redispatch and item.status in IN_FLIGHT:
        _set_status(state, item, ItemStatus.PENDING)
        _set_retry(state, item, None)
        state.index.finished_attempts[e.phase] += 1


def _poisoned(state: RunState, e: ItemsPoisoned) -> None:
    root = item_key(e.root_component, e.root_phase)
    for cid, phase in e.items:
        item = state.item(cid, phase)
        if item.status not in {ItemStatus.DONE, ItemStatus.FAILED, ItemStatus.CANCELLED}:
            _set_status(state, item, ItemStatus.POISONED)
            item.poisoned_by = root


def _suspended(state: RunState, e: ItemsSuspended) -> None:
    for cid, phase in e.items:
        item = state.item(cid, phase)
        if item.status in ready.WAITING:
            _set_status(state, item, ItemStatus.SUSPENDED)
            item.suspension = e.kind
            item.suspension_reason = e.reason


def _promoted(state: RunState, e: ArtifactsPromoted) -> None:
    state.item(e.component_id, e.phase).promoted = True


def _dropped(state: RunState, e: ResultDropped) -> None:
    state.dropped_results += 1


def _paused(state: RunState, e: RunPaused) -> None:
    state.status = RunStatus.PAUSED
    state.pause_reason = e.reason
    state.recommendation = e.recommendation
    state.pattern_type = e.pattern_type
    state.affected_components = list(e.affected_components)


def _resumed(state: RunState, e: RunResumed) -> None:
    state.status = RunStatus.ACTIVE
    resumed(state)  # a resume lifts a cancel (scheduler.lifecycle)
    state.pause_reason = ""
    state.recommendation = ""
    state.fail_reason = ""
    state.pattern_type = ""
    state.affected_components = []
    state.resumed_seq = e.seq
    state.index.failing.clear()  # every failure so far is older than this resume
    if e.agent:
        state.agent = e.agent
        state.agent_options = dict(e.agent_options)
    for cid, phase in e.reset_items:
        item = state.item(cid, phase)
        if item.status is ItemStatus.DONE:
            continue  # verified work is never discarded
        _set_status(state, item, ItemStatus.PENDING)
        item.poisoned_by = None
        _set_retry(state, item, None)
        item.suspension = None
        item.suspension_reason = ""
        item.transient_failures = item.rejections = item.wild_count = 0
    for cid, phase in e.redo_items:
        item = state.item(cid, phase)
        if item.status is ItemStatus.DONE:
            # Done again later: its duration is counted then (the index counts done items).
            seconds = state.index.done_seconds.get(phase)
            if seconds is not None and item.duration_s > 0:
                seconds[0] -= item.duration_s
                seconds[1] -= 1
            _set_status(state, item, ItemStatus.PENDING)
            item.failures = []
            item.rejections = item.transient_failures = item.wild_count = 0


def _regression_checked(state: RunState, e: RegressionChecked) -> None:
    state.regressions[item_key(e.component_id, e.phase)] = e


def _completed(state: RunState, e: RunCompleted) -> None:
    state.status = RunStatus.COMPLETED


def _run_failed(state: RunState, e: RunFailed) -> None:
    state.status = RunStatus.FAILED
    state.fail_reason = e.reason


def _interview_recorded(state: RunState, e: InterviewRecorded) -> None:
    state.interview = e.output
    state.interview_answers = list(e.answers)
    for role, usage in e.usage.items():
        phase = PLANNING_PHASES.get(role, role)
        state.usage = state.usage + usage
        state.spend_by_phase[phase] = state.spend_by_phase.get(phase, 0.0) + usage.cost_usd


def _spend(state: RunState, item: ItemState, phase: Phase, usage: Usage) -> None:
    item.usage = item.usage + usage
    state.usage = state.usage + usage
    state.spend_by_phase[phase.value] = state.spend_by_phase.get(phase.value, 0.0) + usage.cost_usd


_APPLY: dict[type, Callable[[RunState, Any], None]] = {
    RunStarted: _run_started,
    ItemDispatched: _dispatched,
    ItemSucceeded: _succeeded,
    ItemFailed: _failed,
    ContractChecked: _contract_checked,
    CacheHit: _cache_hit,
    CacheDropped: _cache_dropped,
    ItemsPoisoned: _poisoned,
    ItemsSuspended: _suspended,
    ArtifactsPromoted: _promoted,
    ResultDropped: _dropped,
    RunPaused: _paused,
    RunResumed: _resumed,
    RunCompleted: _completed,
    RunFailed: _run_failed,
    InterviewRecorded: _interview_recorded,
    RegressionChecked: _regression_checked,
    RunCancelled: run_cancelled,
    ItemProgress: item_progress,
    **GATE_TRANSITIONS,
}
