"""Run state as a pure fold over the audit log's events.

``fold(events)`` is the only way state is made; ``apply`` is one step of it.
Applying an event whose ``seq`` is not newer than the state's is a no-op, so
replaying a log prefix twice can never double-count a result or a cost.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, Field, PrivateAttr

from pact_workers.models.testing import TestResults
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
from scheduler.events import (
    ArtifactsPromoted,
    CachedResult,
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
from scheduler.state_index import StateIndex
from scheduler.validation.findings import NameCorrection, ValidationFinding

#: ``error_type`` of an attempt lost because the scheduler itself stopped.
INTERRUPTED = "interrupted"


class RunStatus(StrEnum):
    ACTIVE = "active"
    PAUSED = "paused"
    COMPLETED = "completed"
    FAILED = "failed"


def item_key(component_id: str, phase: Phase | str) -> str:
    return f"{component_id}/{Phase(phase).value}"


def phases_for(tree: DecompositionTree, component_id: str) -> list[Phase]:
    """contract, test, then implement for a leaf or integrate for a parent."""
    final = Phase.IMPLEMENT if tree.nodes[component_id].is_leaf else Phase.INTEGRATE
    return [Phase.CONTRACT, Phase.TEST, final]


def final_phase(tree: DecompositionTree, component_id: str) -> Phase:
    return phases_for(tree, component_id)[-1]


class ItemState(BaseModel):
    """Where one (component, phase) work item stands."""

    component_id: str
    phase: Phase
    status: ItemStatus = ItemStatus.PENDING
    #: The current attempt: the last one dispatched (0 before the first).
    attempt: int = 0
    output: str | None = None
    files: list[str] = Field(default_factory=list)
    test_results: TestResults | None = None
    last_error: str = ""
    last_error_class: ErrorClass | None = None
    last_error_type: str = ""
    retry_at: float | None = None
    poisoned_by: str | None = None
    failures: list[FailureNote] = Field(default_factory=list)
    transient_failures: int = 0
    rejections: int = 0
    wild_count: int = 0
    suspension: SuspensionKind | None = None
    suspension_reason: str = ""
    usage: Usage = Field(default_factory=Usage)
    #: How long the successful attempt took (what the scheduler's priorities learn from).
    duration_s: float = 0.0
    promoted: bool = False
    #: The action key of the current attempt (empty: the run does not use the cache).
    action_key: str = ""
    #: The cache hit the current attempt serves (None: the agent is asked).
    cached: CachedResult | None = None
    #: What became of the item's cache hit: ``hit`` (served) or ``dropped`` (not
    #: accepted; the cache is not asked again for this item in this run).
    cache: Literal["", "hit", "dropped"] = ""
    #: What the hit saved: what producing the result cost in the run that recorded it.
    saved: Usage = Field(default_factory=Usage)
    #: ``seq`` of the last event that changed this item, and of its last failure.
    updated_seq: int = 0
    failed_seq: int = 0


class ContractValidation(BaseModel):
    """What the latest check of a component's contract found (only kept when it found
    something): shown by ``pact status``."""

    attempt: int
    accepted: bool
    findings: list[ValidationFinding] = Field(default_factory=list)
    corrections: list[NameCorrection] = Field(default_factory=list)


class RunState(BaseModel):
    """Everything the scheduler knows about one run; rebuilt from the log at will."""

    run_id: str = ""
    status: RunStatus = RunStatus.ACTIVE
    #: Pact's notion of where the run stands: contract, implement, integrate, complete.
    phase: str = "contract"
    #: Where the run lives; set by whoever loads it, never taken from the log.
    project_dir: str = Field(default="", exclude=True)
    tree: DecompositionTree | None = None
    items: dict[str, ItemState] = Field(default_factory=dict)
    #: Internal dependencies per component: the tree's plus those contracts declared.
    dependencies: dict[str, list[str]] = Field(default_factory=dict)
    external_dependencies: dict[str, list[str]] = Field(default_factory=dict)
    #: Findings and name corrections of each component's latest contract check.
    validation: dict[str, ContractValidation] = Field(default_factory=dict)
    usage: Usage = Field(default_factory=Usage)
    spend_by_phase: dict[str, float] = Field(default_factory=dict)
    pause_reason: str = ""
    recommendation: str = ""
    fail_reason: str = ""
    settings: dict[str, object] = Field(default_factory=dict)
    agent: str = ""
    agent_options: dict[str, str] = Field(default_factory=dict)
    sandbox: str = ""
    pattern_type: str = ""
    affected_components: list[str] = Field(default_factory=list)
    #: ``seq`` of the last resume: systemic detection only looks at newer failures.
    resumed_seq: int = 0
    last_seq: int = 0
    dropped_results: int = 0
    #: Problems met while reading the log (not part of the state itself).
    warnings: list[str] = Field(default_factory=list, exclude=True)
    #: Derived indexes (:mod:`scheduler.state_index`); built on first use.
    _index: StateIndex | None = PrivateAttr(default=None)

    @property
    def index(self) -> StateIndex:
        if self._index is None:
            self._index = StateIndex.build(self)
        return self._index

    def reindex(self) -> None:
        """Rebuild the indexes (after the items were changed other than by ``apply``)."""
        self._index = StateIndex.build(self)

    def item(self, component_id: str, phase: Phase | str) -> ItemState:
        return self.items[item_key(component_id, phase)]

    def in_flight(self) -> list[ItemState]:
        """Items dispatched, running or verifying, in dispatch order: O(answer)."""
        return [self.items[key] for key in self.index.in_flight]

    def retry_times(self) -> list[float]:
        """When each pending item that waits for a retry may go again."""
        return list(self.index.retry_at.values())

    def counts(self) -> dict[str, int]:
        return {status.value: n for status, n in self.index.counts.items() if n > 0}


def fold(events: Iterable[Event], state: RunState | None = None) -> RunState:
    state = state if state is not None else RunState()
    for event in events:
        apply(state, event)
    return state


def apply(state: RunState, event: Event) -> RunState:
    """Apply one event in place (and return the state); stale events are ignored."""
    if event.seq and event.seq <= state.last_seq:
        return state
    _APPLY[type(event)](state, event)
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
    state.index.moved(item_key(item.component_id, item.phase), item, status)
    item.status = status


def _set_retry(state: RunState, item: ItemState, retry_at: float | None) -> None:
    """Every change of ``retry_at`` goes through here (the index of waiting items)."""
    item.retry_at = retry_at
    key = item_key(item.component_id, item.phase)
    if retry_at is not None and item.status is ItemStatus.PENDING:
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


def _dispatched(state: RunState, e: ItemDispatched) -> None:
    item = state.item(e.component_id, e.phase)
    _set_status(state, item, ItemStatus.DISPATCHED)
    item.attempt = e.attempt
    _set_retry(state, item, None)
    item.suspension = None
    item.suspension_reason = ""
    item.action_key = e.action_key
    item.cached = e.cached


def _succeeded(state: RunState, e: ItemSucceeded) -> None:
    item = state.item(e.component_id, e.phase)
    _set_status(state, item, ItemStatus.DONE)
    state.index.finished_attempts[e.phase] += 1
    item.output = e.output
    item.cached = None
    item.files = list(e.files)
    item.test_results = e.test_results
    item.duration_s = e.duration_s
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
        if item.status not in {ItemStatus.DONE, ItemStatus.FAILED}:
            _set_status(state, item, ItemStatus.POISONED)
            item.poisoned_by = root


def _suspended(state: RunState, e: ItemsSuspended) -> None:
    for cid, phase in e.items:
        item = state.item(cid, phase)
        if item.status is ItemStatus.PENDING:
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


def _completed(state: RunState, e: RunCompleted) -> None:
    state.status = RunStatus.COMPLETED


def _run_failed(state: RunState, e: RunFailed) -> None:
    state.status = RunStatus.FAILED
    state.fail_reason = e.reason


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
}
