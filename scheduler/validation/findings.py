"""What validation reports: one finding per problem, with where it is and how bad.

A finding names its component, a severity (``error`` rejects a contract attempt and
makes ``pact validate`` exit 1; ``warning`` is recorded and shown), the rule that found
it, the field path inside the contract (``functions[0].description``, ``dependencies[1]``)
and a message that says what to change.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum

from pydantic import BaseModel, ConfigDict


class Severity(StrEnum):
    ERROR = "error"
    WARNING = "warning"


class Rule(StrEnum):
    """Which check produced a finding."""

    #: A dependency that is missing: an internal one without a contract, an external
    #: one that exists nowhere, a name that is no module at all.
    DEPENDENCY = "dependency"
    #: The contract's dependencies close a cycle with the contracts already accepted.
    CYCLE = "cycle"
    #: A type the contract uses is defined nowhere it may look.
    TYPE_REFERENCE = "type_reference"
    #: A dependency name was read as a different (real) component id.
    NAME_CORRECTION = "name_correction"
    #: A dependency that reaches across the tree (distant cousin, other subtree).
    LOCALITY = "locality"
    #: Vague, untestable wording (seed 000, 5.1).
    SPECIFICITY = "specificity"
    #: Side effects missing or inconsistent (seed 000, 5.2).
    SIDE_EFFECTS = "side_effects"


#: The contract-quality rules, whose severity ``contract_quality`` decides.
QUALITY_RULES = frozenset({Rule.SPECIFICITY, Rule.SIDE_EFFECTS})


class QualityMode(StrEnum):
    """``contract_quality`` in pact.yaml: what a contract-quality finding does.

    ``warn`` (the default): every quality finding is a warning, recorded and shown.
    ``block``: every quality finding is an error, so it rejects the contract attempt
    with the findings as feedback, like any other validation error.
    """

    WARN = "warn"
    BLOCK = "block"


class ValidationFinding(BaseModel):
    """One problem found in one contract."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    component_id: str
    severity: Severity
    rule: Rule
    #: Where in the contract, e.g. ``functions[0].description``; empty: the whole contract.
    path: str = ""
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}" if self.path else self.message

    @property
    def is_error(self) -> bool:
        return self.severity is Severity.ERROR


class NameCorrection(BaseModel):
    """A dependency name a contract wrote, and the component id it was read as."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    #: Where the name was written, e.g. ``dependencies[0]``.
    path: str
    written: str
    component_id: str
    #: The normalization rule that matched: case, transposition or affix.
    rule: str

    def __str__(self) -> str:
        return f"{self.path}: {self.written!r} read as {self.component_id!r} ({self.rule})"


def apply_quality_mode(
    findings: Iterable[ValidationFinding], mode: QualityMode
) -> list[ValidationFinding]:
    """Set the severity of every contract-quality finding from ``mode``; others unchanged."""
    severity = Severity.ERROR if mode is QualityMode.BLOCK else Severity.WARNING
    return [
        f.model_copy(update={"severity": severity}) if f.rule in QUALITY_RULES else f
        for f in findings
    ]


def errors_of(findings: Iterable[ValidationFinding]) -> list[ValidationFinding]:
    return [f for f in findings if f.is_error]
