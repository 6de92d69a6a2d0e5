"""Work items and the messages that carry them between scheduler and workers.

A work item is one (component, phase) pair; each dispatch of it is an attempt.
Task and result messages stay small: ids, the attempt (the fencing token) and
artifact digests. Files travel through the artifact store.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from pact_workers.models.environment import EnvironmentSpec
from pact_workers.models.testing import TestResults


class Phase(StrEnum):
    CONTRACT = "contract"
    TEST = "test"
    IMPLEMENT = "implement"
    INTEGRATE = "integrate"


class Role(StrEnum):
    CONTRACT_AUTHOR = "contract_author"
    TEST_AUTHOR = "test_author"
    CODE_AUTHOR = "code_author"
    INTEGRATOR = "integrator"
    TRACE_ANALYST = "trace_analyst"
    #: Reviews a verified attempt against the contract before promotion (gates).
    AUDITOR = "auditor"
    #: The planning roles (``pact plan``): they serve no (component, phase) work item.
    INTERVIEWER = "interviewer"
    DECOMPOSER = "decomposer"


ROLE_FOR_PHASE: dict[Phase, Role] = {
    Phase.CONTRACT: Role.CONTRACT_AUTHOR,
    Phase.TEST: Role.TEST_AUTHOR,
    Phase.IMPLEMENT: Role.CODE_AUTHOR,
    Phase.INTEGRATE: Role.INTEGRATOR,
}


class ItemStatus(StrEnum):
    """Lifecycle of a work item (see DESIGN: work item lifecycle)."""

    PENDING = "pending"
    READY = "ready"
    DISPATCHED = "dispatched"
    RUNNING = "running"
    VERIFYING = "verifying"
    DONE = "done"
    FAILED = "failed"
    POISONED = "poisoned"
    SUSPENDED = "suspended"
    CANCELLED = "cancelled"
    #: Verified, waiting for a human's approval before promotion (``review:``).
    AWAITING_REVIEW = "awaiting_review"


#: Statuses an item never leaves on its own.
TERMINAL = frozenset(
    {ItemStatus.DONE, ItemStatus.FAILED, ItemStatus.POISONED, ItemStatus.CANCELLED}
)
#: Statuses of an item that holds a worker slot.
IN_FLIGHT = frozenset({ItemStatus.DISPATCHED, ItemStatus.RUNNING, ItemStatus.VERIFYING})


class SuspensionKind(StrEnum):
    """Why an item cannot proceed (A7-RT's typed suspension)."""

    NEAR = "near"  # one step away: waiting out a retry backoff
    FAR = "far"  # needs a human or outside data (budget spent, run paused)
    VOID = "void"  # a contradiction: retrying cannot help (dependency cycle)
    WILD = "wild"  # schema violation or a stalled agent; twice on one item halts it


class ErrorClass(StrEnum):
    """How the scheduler treats a failure (seed 000, 1.2)."""

    TRANSIENT = "transient"
    PERMANENT = "permanent"
    SYSTEMIC = "systemic"


class WorkItem(BaseModel):
    """One (component, phase) pair at one attempt."""

    model_config = ConfigDict(frozen=True)

    component_id: str
    phase: Phase
    attempt: int = Field(default=1, ge=1)

    @property
    def key(self) -> tuple[str, Phase]:
        return (self.component_id, self.phase)

    @property
    def role(self) -> Role:
        return ROLE_FOR_PHASE[self.phase]

    def __str__(self) -> str:
        return f"{self.component_id}/{self.phase.value}#{self.attempt}"


class Usage(BaseModel):
    """Tokens and money one agent call spent."""

    model_config = ConfigDict(frozen=True)

    input_tokens: int = Field(default=0, ge=0)
    output_tokens: int = Field(default=0, ge=0)
    #: Finite: an infinite cost would be logged as null, which no log reader accepts.
    cost_usd: float = Field(default=0.0, ge=0.0, allow_inf_nan=False)

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cost_usd=self.cost_usd + other.cost_usd,
        )


#: Nothing spent. Usage is frozen (and so hashable), so a field defaulting to this
#: shares the one instance instead of building a model per default: a run's state
#: holds three usages per work item, most of them nothing.
NO_USAGE = Usage()


class FailureNote(BaseModel):
    """What a failed attempt tells the next one: failing tests' names and messages, and
    the digest of the files it wrote (so that the next prompt can say what it changed)."""

    model_config = ConfigDict(frozen=True)

    attempt: int
    summary: str
    failing_tests: list[tuple[str, str]] = Field(default_factory=list)
    output: str | None = None


class CachedOutput(BaseModel):
    """An action-cache hit a worker serves instead of calling the agent."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    #: Digest of the cached result's bundle, in the artifact store.
    output: str
    #: Verify it as the agent's answer would be (``cache: verify``); False
    #: (``cache: trust``): return it as it is.
    verify: bool = True


class TaskMessage(BaseModel):
    """What a worker needs to execute one attempt of one work item."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    run_id: str
    component_id: str
    phase: Phase
    attempt: int = Field(ge=1)
    #: Bundles the agent may see, by name (``spec``, ``contract``, ``deps``...).
    inputs: dict[str, str] = Field(default_factory=dict)
    #: Bundles only the harness sees (the contract tests, for the code author).
    verify_inputs: dict[str, str] = Field(default_factory=dict)
    feedback: list[FailureNote] = Field(default_factory=list)
    environment: EnvironmentSpec = Field(default_factory=EnvironmentSpec)
    timeout_s: float = Field(default=300.0, gt=0)
    #: Which agent and sandbox the worker builds (options never hold secrets).
    agent: str = "replay"
    agent_options: dict[str, str] = Field(default_factory=dict)
    sandbox: str = "local"
    #: The Redis stream the result goes to (fleet only; empty in-process).
    reply_to: str = ""
    #: A verified result from the action cache: the worker skips the agent and runs
    #: the harness on it; when the harness rejects it, the worker asks the agent.
    cached: CachedOutput | None = None
    #: ``teachback``: the agent restates its task first (``teachback.json``), which
    #: the scheduler reviews before the work call; ``work``: the role's artifacts.
    stage: Literal["work", "teachback", "audit"] = "work"
    #: The item's variety score, dimensions and gates in a few words (what Flower
    #: shows among the task's arguments).
    variety: str = ""

    @property
    def item(self) -> WorkItem:
        return WorkItem(component_id=self.component_id, phase=self.phase, attempt=self.attempt)

    @property
    def role(self) -> Role:
        """The role (and so the queue) this attempt goes to: the auditor for an audit."""
        return Role.AUDITOR if self.stage == "audit" else ROLE_FOR_PHASE[self.phase]

    @property
    def idempotency_key(self) -> str:
        return f"{self.run_id}:{self.component_id}:{self.phase.value}:{self.attempt}"


#: What one attempt can report, at most: more is no measurement but a broken or hostile
#: sender (a result is read from a Redis stream anyone with the password can write to).
#: The bounds keep a run's totals finite: two costs of 1.7e308 add up to infinity, which
#: no log line, snapshot or priority can hold.
MAX_ATTEMPT_COST_USD = 1e6
MAX_ATTEMPT_S = 1e7
MAX_ATTEMPT_TOKENS = 10**12
#: A result's texts (error, model, worker) are cut to this many characters: each ends
#: up in one line of the audit log.
MAX_TEXT_CHARS = 65_536


def cut_text(text: object) -> object:
    """A text read from the wire cut at :data:`MAX_TEXT_CHARS`, saying how much was cut
    (anything else as it is, for the field's own check)."""
    if isinstance(text, str) and len(text) > MAX_TEXT_CHARS:
        return f"{text[:MAX_TEXT_CHARS]} [{len(text) - MAX_TEXT_CHARS} characters cut]"
    return text


class ResultMessage(BaseModel):
    """The outcome of one attempt, as the worker's harness measured it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    run_id: str
    component_id: str
    phase: Phase
    attempt: int = Field(ge=1)
    outcome: Literal["ok", "error"]
    error_class: ErrorClass | None = None
    error_type: str = ""
    error: str = ""
    #: Digest of the output bundle (present when the agent produced files).
    output: str | None = None
    test_results: TestResults | None = None
    usage: Usage = Field(default_factory=Usage)
    duration_s: float = Field(default=0.0, ge=0, le=MAX_ATTEMPT_S, allow_inf_nan=False)
    #: The model that answered (as the backend reported it) and the worker slot
    #: (``host/slot``) that ran the attempt: provenance of what it produced.
    model: str = ""
    worker: str = ""

    @field_validator("usage")
    @classmethod
    def _one_attempts_usage(cls, usage: Usage) -> Usage:
        if usage.cost_usd > MAX_ATTEMPT_COST_USD:
            raise ValueError(
                f"cost_usd {usage.cost_usd:g} is more than one attempt can cost "
                f"(at most {MAX_ATTEMPT_COST_USD:g})"
            )
        if max(usage.input_tokens, usage.output_tokens) > MAX_ATTEMPT_TOKENS:
            raise ValueError(f"more tokens than one attempt can use (at most {MAX_ATTEMPT_TOKENS})")
        return usage

    @field_validator("error", "model", "worker", mode="before")
    @classmethod
    def _cut(cls, text: object) -> object:
        return cut_text(text)

    @property
    def item(self) -> WorkItem:
        return WorkItem(component_id=self.component_id, phase=self.phase, attempt=self.attempt)

    @property
    def idempotency_key(self) -> str:
        return f"{self.run_id}:{self.component_id}:{self.phase.value}:{self.attempt}"
