"""Contract validation (seed 000, section 2) and contract quality (section 5).

Every contract is validated as soon as it is authored, before anything is dispatched
against it: before its tests, before its implementation, before any dependent's
contract. The rules, in the order they are applied:

- Names. Every name in ``dependencies`` and ``external_dependencies`` is read as one
  of the tree's component ids when it is one: exactly, ignoring case, with its words
  transposed, or with a first or last word dropped, and only when exactly one id
  fits (``names``). A name read as a different id is a *correction*: recorded (an
  event in a run, shown by ``pact status``) and a warning; the edge uses the real id.
- Internal dependencies (names read as ids) must have a contract already; a run
  makes the next attempt wait for that contract.
- External dependencies (the other names) must exist: importable in the run's
  environment, checked by the harness in the sandbox that verifies the contract, or
  present in the project's source tree (``externals``).
- Type references resolve: the contract's own types, its internal dependencies'
  types, builtins (``typerefs``).
- No cycle: the new dependencies may not close a cycle with the tree and the
  contracts already accepted.
- Locality: a dependency on a distant cousin or across subtrees is a warning, never
  an error (``locality``).
- Quality: vague wording and missing side effects (``quality``) are warnings under
  ``contract_quality: warn`` (the default) and errors under ``block``.

Errors reject the contract attempt; the next attempt gets the findings as feedback
(a cycle alone is final: retrying cannot remove an edge the tree declares). Warnings
are recorded and shown. A check is cached by the contract's digest and what it was
checked against, so a batch validation at the end (``pact validate``) is a lookup
that finds the same.
"""

from __future__ import annotations

from scheduler.validation.externals import Importable, find_in_source_tree, is_module_name
from scheduler.validation.findings import (
    QUALITY_RULES,
    NameCorrection,
    QualityMode,
    Rule,
    Severity,
    ValidationFinding,
    apply_quality_mode,
)
from scheduler.validation.incremental import (
    CheckInputs,
    ContractCheck,
    ValidationCache,
    accepted_edges,
    check_contract,
    contract_digest,
    validate_contract_incremental,
)
from scheduler.validation.locality import validate_hierarchy_locality
from scheduler.validation.names import (
    DependencyKind,
    NameIndex,
    ResolvedDependency,
    normalize_dependency_name,
)
from scheduler.validation.quality import (
    VAGUE_PATTERNS,
    audit_contract_quality,
    audit_contract_specificity,
    audit_side_effects,
)
from scheduler.validation.report import ValidationReport, authoring_order, validate_contracts
from scheduler.validation.typerefs import BUILTIN_TYPES, check_type_references

__all__ = [
    "BUILTIN_TYPES",
    "QUALITY_RULES",
    "VAGUE_PATTERNS",
    "CheckInputs",
    "ContractCheck",
    "DependencyKind",
    "Importable",
    "NameCorrection",
    "NameIndex",
    "QualityMode",
    "ResolvedDependency",
    "Rule",
    "Severity",
    "ValidationCache",
    "ValidationFinding",
    "ValidationReport",
    "accepted_edges",
    "apply_quality_mode",
    "audit_contract_quality",
    "audit_contract_specificity",
    "audit_side_effects",
    "authoring_order",
    "check_contract",
    "check_type_references",
    "contract_digest",
    "find_in_source_tree",
    "is_module_name",
    "normalize_dependency_name",
    "validate_contract_incremental",
    "validate_contracts",
    "validate_hierarchy_locality",
]
