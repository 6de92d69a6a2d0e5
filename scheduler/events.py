"""The typed events of the audit log (a pydantic discriminated union on ``type``).

The log is the source of truth: :mod:`scheduler.state` folds these events into
the run state, and nothing else changes it. Each event carries ``seq``, its
position in the log, so that applying the same event twice changes nothing.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from pact_workers.models.testing import TestResults
from pact_workers.models.work import (
    ErrorClass,
    FailureNote,
    Phase,
    ResultMessage,
    SuspensionKind,
    Usage,
)
from scheduler.gates.dimensions import GateRecord
from scheduler.gates.events import (
    AuditRequested,
    AuditReviewed,
    GateWouldHaveBlocked,
    ReviewDecided,
    ReviewRequested,
    Stage,
    TeachbackReviewed,
    TeachbackSubmitted,
)
from scheduler.interview.recorded import InterviewRecorded
from scheduler.lifecycle.events import ItemProgress, RunCancelled
from scheduler.regression.events import RegressionChecked
from scheduler.validation.findings import NameCorrection, ValidationFinding
from scheduler.validation.names import ResolvedDependency


def utc_now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


class _Event(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    seq: int = 0
    ts: str = Field(default_factory=utc_now)


class _ItemEvent(_Event):
    component_id: str
    phase: Phase
    attempt: int


class RunStarted(_Event):
    type: Literal["run_started"] = "run_started"
    run_id: str
    tree: dict[str, Any]
    settings: dict[str, Any] = Field(default_factory=dict)
    agent: str = ""
    #: How to rebuild the agent on resume (e.g. the replay directory); never secrets.
    agent_options: dict[str, str] = Field(default_factory=dict)
    sandbox: str = ""


class CachedResult(BaseModel):
    """A verified result of the action cache that an attempt serves instead of asking
    the agent (``scheduler.cache``): what it is, where it came from, what it saves."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    #: Digest of the cached result's bundle (copied into the run's artifact store).
    output: str
    #: ``cache: trust``: the harness does not verify it again.
    trusted: bool = False
    #: The run that recorded it, and what producing it cost there.
    source_run: str = ""
    saved: Usage = Field(default_factory=Usage)
    saved_s: float = 0.0
    #: What the harness measured when it was recorded (kept for ``trust`` only).
    test_results: TestResults | None = None


class ItemDispatched(_ItemEvent):
    type: Literal["item_dispatched"] = "item_dispatched"
    role: str
    inputs: dict[str, str] = Field(default_factory=dict)
    verify_inputs: dict[str, str] = Field(default_factory=dict)
    feedback: list[FailureNote] = Field(default_factory=list)
    timeout_s: float = 0.0
    #: The item's action key (empty when the run does not use the action cache).
    action_key: str = ""
    #: A cache hit this attempt serves instead of an agent call (None: the agent).
    cached: CachedResult | None = None
    #: The item's variety dimensions, score and gates (``scheduler.gates``), and
    #: whether this attempt is the teachback that must precede the work call.
    gate: GateRecord | None = None
    stage: Stage = "work"


class ItemSucceeded(_ItemEvent):
    type: Literal["item_succeeded"] = "item_succeeded"
    output: str
    files: list[str] = Field(default_factory=list)
    test_results: TestResults | None = None
    usage: Usage = Field(default_factory=Usage)
    duration_s: float = 0.0
    #: Internal dependencies a new contract declared (they now gate implementation).
    discovered_dependencies: list[str] = Field(default_factory=list)
    external_dependencies: list[str] = Field(default_factory=list)
    #: Who produced the output: the model that answered and the worker slot.
    model: str = ""
    worker: str = ""

    @classmethod
    def from_result(
        cls, result: ResultMessage, *, files: list[str], discovered: list[str], external: list[str]
    ) -> ItemSucceeded:
        return cls(
            component_id=result.component_id,
            phase=result.phase,
            attempt=result.attempt,
            output=result.output or "",
            files=files,
            test_results=result.test_results,
            usage=result.usage,
            duration_s=result.duration_s,
            discovered_dependencies=discovered,
            external_dependencies=external,
            model=result.model,
            worker=result.worker,
        )


class ItemFailed(_ItemEvent):
    type: Literal["item_failed"] = "item_failed"
    error_class: ErrorClass
    error_type: str = ""
    error: str = ""
    test_results: TestResults | None = None
    usage: Usage = Field(default_factory=Usage)
    duration_s: float = 0.0
    #: The policy's decision, recorded so that replaying the log needs no policy.
    decision: Literal["retry", "give_up", "pause"]
    #: Digest of the files the rejected attempt wrote (in the artifact store), if any.
    output: str | None = None
    retry_at: float | None = None
    #: Typed suspension while the item cannot proceed (seed 002): ``wild`` for a
    #: schema violation or a stalled agent, ``void`` for a contradiction (a cycle).
    suspension: SuspensionKind | None = None
    #: The worker slot that ran the attempt (empty when no worker answered).
    worker: str = ""

    @classmethod
    def from_result(
        cls,
        result: ResultMessage,
        *,
        decision: Literal["retry", "give_up", "pause"],
        retry_at: float | None,
        suspension: SuspensionKind | None,
    ) -> ItemFailed:
        return cls(
            component_id=result.component_id,
            phase=result.phase,
            attempt=result.attempt,
            error_class=result.error_class or ErrorClass.PERMANENT,
            error_type=result.error_type,
            error=result.error,
            test_results=result.test_results,
            usage=result.usage,
            duration_s=result.duration_s,
            output=result.output,
            decision=decision,
            retry_at=retry_at,
            suspension=suspension,
            worker=result.worker,
        )


class ContractChecked(_ItemEvent):
    """The validation of one contract attempt, logged before it is accepted or rejected.

    Replayed, it gives ``pact status`` the findings and name corrections, and
    ``pact validate`` its cache (a contract with the same digest, checked against the
    same context, is not checked again).
    """

    type: Literal["contract_checked"] = "contract_checked"
    #: sha256 of the contract's canonical JSON, and of what it was checked against.
    digest: str
    context: str = ""
    accepted: bool = True
    findings: list[ValidationFinding] = Field(default_factory=list)
    corrections: list[NameCorrection] = Field(default_factory=list)
    dependencies: list[ResolvedDependency] = Field(default_factory=list)
    #: Internal dependencies whose contracts did not exist yet: they become edges, so
    #: the next attempt of this contract waits for their contracts.
    waits_for: list[str] = Field(default_factory=list)


class CacheHit(_ItemEvent):
    """The attempt's cached result was accepted (verified again, or trusted): no agent
    was called, and what producing it cost elsewhere was saved. Logged just before the
    item's ``item_succeeded``."""

    type: Literal["cache_hit"] = "cache_hit"
    action_key: str
    output: str
    source_run: str = ""
    saved: Usage = Field(default_factory=Usage)
    saved_s: float = 0.0
    trusted: bool = False
    #: How long verifying the cached result took (0 when trusted).
    verify_s: float = 0.0

    @classmethod
    def from_result(cls, result: ResultMessage, key: str, hit: CachedResult) -> CacheHit:
        return cls(
            component_id=result.component_id,
            phase=result.phase,
            attempt=result.attempt,
            action_key=key,
            output=hit.output,
            source_run=hit.source_run,
            saved=hit.saved,
            saved_s=hit.saved_s,
            trusted=hit.trusted,
            verify_s=0.0 if hit.trusted else result.duration_s,
        )


class CacheDropped(_ItemEvent):
    """The attempt's cached result was not accepted: the harness (on the worker, or the
    contract checks here) rejected it. The action cache is not asked again for this item
    in this run. ``redispatch``: the item goes back to pending, to be dispatched to the
    agent (when the worker had already asked the agent itself, its answer follows)."""

    type: Literal["cache_dropped"] = "cache_dropped"
    action_key: str
    output: str
    reason: str
    redispatch: bool = False

    @classmethod
    def from_result(
        cls, result: ResultMessage, key: str, hit: CachedResult, reason: str, *, redispatch: bool
    ) -> CacheDropped:
        return cls(
            component_id=result.component_id,
            phase=result.phase,
            attempt=result.attempt,
            action_key=key,
            output=hit.output,
            reason=reason,
            redispatch=redispatch,
        )


class ItemsSuspended(_Event):
    """Items that cannot be dispatched until a human acts (e.g. the budget is spent)."""

    type: Literal["items_suspended"] = "items_suspended"
    kind: SuspensionKind
    reason: str
    items: list[tuple[str, Phase]]


class ItemsPoisoned(_Event):
    type: Literal["items_poisoned"] = "items_poisoned"
    root_component: str
    root_phase: Phase
    items: list[tuple[str, Phase]]


class ArtifactsPromoted(_Event):
    type: Literal["artifacts_promoted"] = "artifacts_promoted"
    component_id: str
    phase: Phase
    paths: list[str]


class ResultDropped(_ItemEvent):
    type: Literal["result_dropped"] = "result_dropped"
    reason: str
    #: The worker slot that sent the dropped result.
    worker: str = ""

    @classmethod
    def from_result(cls, result: ResultMessage, reason: str) -> ResultDropped:
        return cls(
            component_id=result.component_id,
            phase=result.phase,
            attempt=result.attempt,
            reason=reason,
            worker=result.worker,
        )


class RunPaused(_Event):
    type: Literal["run_paused"] = "run_paused"
    reason: str
    recommendation: str = ""
    pattern_type: str = ""
    affected_components: list[str] = Field(default_factory=list)


class RunResumed(_Event):
    """``daemon_resume`` in Pact's terms: the original failure reason is kept here."""

    type: Literal["run_resumed"] = "run_resumed"
    original_status: str
    original_reason: str = ""
    resume_phase: str = ""
    #: Items given a fresh start (failed, poisoned or suspended ones).
    reset_items: list[tuple[str, Phase]] = Field(default_factory=list)
    inconsistencies: list[str] = Field(default_factory=list)
    #: A different agent for the rest of the run (empty: keep the run's).
    agent: str = ""
    agent_options: dict[str, str] = Field(default_factory=dict)
    #: Done items a human asked to do again (``pact resume --redo``): pending, their
    #: verified files stay promoted until a new attempt is verified and checked.
    redo_items: list[tuple[str, Phase]] = Field(default_factory=list)


class RunCompleted(_Event):
    type: Literal["run_completed"] = "run_completed"


class RunFailed(_Event):
    type: Literal["run_failed"] = "run_failed"
    reason: str


Event = Annotated[
    RunStarted
    | ItemDispatched
    | ItemSucceeded
    | ItemFailed
    | ContractChecked
    | CacheHit
    | CacheDropped
    | ItemsPoisoned
    | ItemsSuspended
    | ArtifactsPromoted
    | ResultDropped
    | RunPaused
    | RunResumed
    | RunCompleted
    | RunFailed
    | InterviewRecorded
    | GateWouldHaveBlocked
    | TeachbackSubmitted
    | TeachbackReviewed
    | ReviewRequested
    | ReviewDecided
    | AuditRequested
    | AuditReviewed
    | RegressionChecked
    | RunCancelled
    | ItemProgress,
    Field(discriminator="type"),
]

EVENT_ADAPTER: TypeAdapter[Event] = TypeAdapter(Event)


def parse_event(line: str | bytes) -> Event:
    return EVENT_ADAPTER.validate_json(line)
