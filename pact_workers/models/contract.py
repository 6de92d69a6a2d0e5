"""Component contracts, in the shape Pact writes ``interface.json``.

Every model accepts the documents Pact itself produced, unchanged, and keeps
fields it does not know (``extra="allow"``) so that a contract round-trips.

Side effects (seed 000, 5.2) are declared as :class:`SideEffect` objects, either in
``side_effects`` (the seed's form: ``[{"kind": "none"}]``) or in
``structured_side_effects`` (Pact's own field for them). A contract written before
side effects were declared holds free-text strings in ``side_effects`` (or nothing):
it still loads unchanged, the strings are kept as written, and
:attr:`ContractFunction.declared_effects` simply holds no effect for it, which the
contract-quality rules report (see ``scheduler.validation``).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class _Doc(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True)


class ValidatorSpec(_Doc):
    """A validation rule on a field."""

    kind: Literal["range", "regex", "length", "custom"]
    expression: str
    error_message: str = ""


class FieldSpec(_Doc):
    """A typed field of a struct or a function input."""

    name: str
    type_ref: str
    required: bool = True
    default: str = ""
    description: str = ""
    validators: list[ValidatorSpec] = Field(default_factory=list)


class TypeSpec(_Doc):
    """A type a contract defines."""

    name: str
    kind: Literal["primitive", "struct", "enum", "list", "optional", "union"]
    fields: list[FieldSpec] = Field(default_factory=list)
    item_type: str = ""
    variants: list[str] = Field(default_factory=list)
    inner_types: list[str] = Field(default_factory=list)
    description: str = ""


class ErrorCase(_Doc):
    """An error a function can raise, and when."""

    name: str
    condition: str
    error_type: str
    error_data: dict[str, str] = Field(default_factory=dict)


class SideEffectKind(StrEnum):
    """What a function does besides returning a value; ``none`` for a pure function."""

    NONE = "none"
    READS_FILE = "reads_file"
    WRITES_FILE = "writes_file"
    NETWORK_CALL = "network_call"
    MUTATES_STATE = "mutates_state"
    LOGGING = "logging"


class SideEffect(_Doc):
    """One declared side effect of a function."""

    kind: SideEffectKind
    target: str = ""
    description: str = ""


class PerformanceBudget(_Doc):
    """Optional performance constraints on a function.

    The harness verifies ``p95_latency_ms`` and ``max_memory_mb`` with a test of its
    own that it adds to the contract tests (see ``pact_workers.budget_plugin``);
    ``complexity`` is documentation and is never verified.
    """

    p95_latency_ms: int | None = Field(default=None, ge=1)
    max_memory_mb: int | None = Field(default=None, ge=1)
    complexity: str | None = None


class ContractFunction(_Doc):
    """The contract of one function: inputs, output, errors, conditions."""

    name: str
    description: str
    inputs: list[FieldSpec] = Field(default_factory=list)
    output_type: str
    error_cases: list[ErrorCase] = Field(default_factory=list)
    preconditions: list[str] = Field(default_factory=list)
    postconditions: list[str] = Field(default_factory=list)
    idempotent: bool = False
    #: Declared effects (objects) or, in contracts that predate them, free text.
    side_effects: list[SideEffect | str] = Field(default_factory=list)
    structured_side_effects: list[SideEffect] = Field(default_factory=list)
    performance_budget: PerformanceBudget | None = None

    @property
    def declared_effects(self) -> list[SideEffect]:
        """Every structured side effect, from either field."""
        listed = [e for e in self.side_effects if isinstance(e, SideEffect)]
        return [*self.structured_side_effects, *listed]

    @property
    def free_text_effects(self) -> list[str]:
        """Side effects written as free text (Pact's form before they were declared)."""
        return [e for e in self.side_effects if isinstance(e, str)]


#: Pact's own name for a contract function.
FunctionContract = ContractFunction


class ComponentContract(_Doc):
    """The interface contract of one component.

    ``dependencies`` name other components of the same tree (internal);
    ``external_dependencies`` name modules of an existing code base, which
    never block scheduling.
    """

    component_id: str
    name: str
    description: str
    version: int = 1
    types: list[TypeSpec] = Field(default_factory=list)
    functions: list[ContractFunction] = Field(default_factory=list)
    dependencies: list[str] = Field(default_factory=list)
    external_dependencies: list[str] = Field(default_factory=list)
    dependency_contracts: dict[str, list[str]] = Field(default_factory=dict)
    invariants: list[str] = Field(default_factory=list)
    requires: list[str] = Field(default_factory=list)
