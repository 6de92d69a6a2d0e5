"""Run state: what the scheduler knows about one run, made only by folding the audit
log's events (:mod:`scheduler.fold`)."""

from __future__ import annotations

from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, Field, PrivateAttr

from pact_workers.models.testing import TestResults
from pact_workers.models.tree import DecompositionTree
from pact_workers.models.work import (
    NO_USAGE,
    ErrorClass,
    FailureNote,
    ItemStatus,
    Phase,
    SuspensionKind,
    Usage,
)
from scheduler.events import (
    CachedResult,
)
from scheduler.gates.item import NO_GATES, ItemGates
from scheduler.interview.answers import AuditedAnswer
from scheduler.regression.events import RegressionChecked
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
    # A phase hashes as its value, so the table serves a plain string too; the run
    # loop makes tens of keys per item, and ``.value`` is a descriptor call.
    value = PHASE_VALUES.get(phase)
    if value is None:
        value = Phase(phase).value  # raises ValueError: not a phase
    return f"{component_id}/{value}"


#: Each phase's value (``.value`` is a descriptor call; loops over items use this).
PHASE_VALUES: dict[Phase | str, str] = {phase: phase.value for phase in Phase}


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
    usage: Usage = NO_USAGE
    #: How long the successful attempt took (what the scheduler's priorities learn from).
    duration_s: float = 0.0
    #: Provenance of the accepted attempt: the model that answered, the worker slot,
    #: what that attempt alone cost, and when it was accepted (``.meta.json`` sidecars).
    model: str = ""
    worker: str = ""
    accepted_usage: Usage = NO_USAGE
    accepted_at: str = ""
    promoted: bool = False
    #: The action key of the current attempt (empty: the run does not use the cache).
    action_key: str = ""
    #: The cache hit the current attempt serves (None: the agent is asked).
    cached: CachedResult | None = None
    #: What became of the item's cache hit: ``hit`` (served) or ``dropped`` (not
    #: accepted; the cache is not asked again for this item in this run).
    cache: Literal["", "hit", "dropped"] = ""
    #: What the hit saved: what producing the result cost in the run that recorded it.
    saved: Usage = NO_USAGE
    #: ``seq`` of the last event that changed this item, and of its last failure.
    updated_seq: int = 0
    failed_seq: int = 0
    #: Digest of the implementation closure (``deps_src``) the current attempt is
    #: verified against: a promotion checks it is still current (``scheduler.regression``).
    verify_closure: str = ""
    #: The item's variety score, teachback and human review (``scheduler.gates``):
    #: the shared, frozen :data:`~scheduler.gates.item.NO_GATES` until a gate acts on
    #: the item (the fold then gives it its own, :func:`~scheduler.gates.item.open_gates`).
    gates: ItemGates = NO_GATES

    def model_post_init(self, context: Any, /) -> None:
        # Every field counts as set, in one set all items share. Pydantic records each
        # assignment in a set per instance, which grows to 2 KB as the fold fills an
        # item in (60 MB for the 30,000 items of a 10,000-component run), and nothing
        # reads it: the state is written with ``exclude_defaults``, never ``exclude_unset``.
        object.__setattr__(self, "__pydantic_fields_set__", _ALL_ITEM_FIELDS)


#: See ``ItemState.model_post_init``.
_ALL_ITEM_FIELDS = set(ItemState.model_fields)


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
    #: Set by ``pact cancel`` (who cancelled, and why), cleared by a resume: no new
    #: attempt is dispatched and the results of fenced attempts are dropped.
    cancelled: bool = False
    cancelled_by: str = ""
    #: The latest regression check of each promoted item (``scheduler.regression``).
    regressions: dict[str, RegressionChecked] = Field(default_factory=dict)
    #: The run's interview (``interview_recorded``): its bundle's digest, shown to the
    #: contract authors, and the answers in use with their source and confidence.
    interview: str = ""
    interview_answers: list[AuditedAnswer] = Field(default_factory=list)
    #: Problems met while reading the log (not part of the state itself).
    warnings: list[str] = Field(default_factory=list, exclude=True)
    #: Derived indexes (:mod:`scheduler.state_index`); built on first use.
    _index: StateIndex | None = PrivateAttr(default=None)

    @property
    def index(self) -> StateIndex:
        # Read from the private-attribute dict directly: ``self._index`` goes through
        # pydantic's ``__getattr__`` (measured 27 us against 0.4 us), and the fold asks
        # for the index several times per event.
        private = self.__pydantic_private__
        assert private is not None
        index: StateIndex | None = private.get("_index")
        if index is None:
            index = private["_index"] = StateIndex.build(self)
        return index

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
