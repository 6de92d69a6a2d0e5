"""Validate one contract as soon as it is authored (seed 000, 2.1-2.4 and 5).

:func:`check_contract` is the one check behind the run (each contract, before
anything is dispatched against it), ``pact validate`` (every contract, in order) and
the MCP tool. Its result is cached by the contract's digest together with a digest of
what it was checked against, so validating the same contracts again is a lookup that
returns the same findings.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pact_workers.models.contract import ComponentContract
from pact_workers.models.tree import DecompositionTree, implementation_edges
from scheduler.validation.dependencies import (
    dependency_cycle,
    external_problem,
    field_paths,
    finding,
    resolve_dependencies,
)
from scheduler.validation.externals import (
    Importable,
    unchecked,
)
from scheduler.validation.findings import (
    NameCorrection,
    QualityMode,
    Rule,
    Severity,
    ValidationFinding,
    apply_quality_mode,
)
from scheduler.validation.locality import locality_findings
from scheduler.validation.names import (
    DependencyKind,
    NameIndex,
    ResolvedDependency,
)
from scheduler.validation.quality import audit_contract_quality
from scheduler.validation.typerefs import check_type_references


def contract_digest(contract: ComponentContract) -> str:
    """sha256 of the contract's canonical JSON (key order and whitespace do not count)."""
    doc = json.dumps(contract.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(doc.encode()).hexdigest()


@dataclass(frozen=True)
class ContractCheck:
    """Everything one validation of one contract found."""

    component_id: str
    digest: str
    #: Digest of what the contract was checked against (ids, dependency contracts,
    #: external modules found, quality mode): a cached check is reused only for the same.
    context: str
    findings: tuple[ValidationFinding, ...]
    dependencies: tuple[ResolvedDependency, ...] = ()
    corrections: tuple[NameCorrection, ...] = ()
    #: The cycle the contract's dependencies close (``[a, b, a]``), if any.
    cycle: tuple[str, ...] = ()

    @property
    def errors(self) -> list[ValidationFinding]:
        return [f for f in self.findings if f.is_error]

    @property
    def accepted(self) -> bool:
        return not self.errors

    @property
    def internal(self) -> list[str]:
        return [d.component_id for d in self.dependencies if d.kind is DependencyKind.INTERNAL]

    @property
    def external(self) -> list[str]:
        return [d.component_id for d in self.dependencies if d.kind is DependencyKind.EXTERNAL]

    @property
    def missing_contracts(self) -> list[str]:
        """Internal dependencies whose contract does not exist (yet)."""
        return [
            d.component_id
            for d in self.dependencies
            if d.kind is DependencyKind.INTERNAL and not d.contract_exists
        ]


@dataclass
class ValidationCache:
    """Checks by (contract digest, context digest); ``hits`` counts reuses."""

    checks: dict[tuple[str, str], ContractCheck] = field(default_factory=dict)
    hits: int = 0

    def get(self, digest: str, context: str) -> ContractCheck | None:
        found = self.checks.get((digest, context))
        if found is not None:
            self.hits += 1
        return found

    def put(self, check: ContractCheck) -> None:
        self.checks[(check.digest, check.context)] = check


@dataclass(frozen=True)
class CheckInputs:
    """What a contract is checked against."""

    names: NameIndex
    #: Contracts already accepted (a dependency's types are looked up here).
    existing: Mapping[str, ComponentContract]
    tree: DecompositionTree | None = None
    source_tree: Path | None = None
    importable: Importable = unchecked
    quality: QualityMode = QualityMode.WARN
    #: What each component waits for (internal dependencies and children) as accepted
    #: so far: a new dependency that closes a cycle here is an error. None: not checked.
    edges: Mapping[str, Sequence[str]] | None = None


def check_contract(
    contract: ComponentContract,
    inputs: CheckInputs,
    *,
    cache: ValidationCache | None = None,
    digest: str | None = None,
) -> ContractCheck:
    """Validate ``contract`` against ``inputs``: names, dependencies, types, locality,
    quality (cached), then cycles with the contracts already accepted (never cached:
    the graph grows as contracts are accepted)."""
    cid = contract.component_id
    digest = digest or contract_digest(contract)
    resolved, corrections, findings = resolve_dependencies(contract, inputs)
    context = _context(inputs, resolved)
    cached = cache.get(digest, context) if cache is not None else None
    if cached is None:
        findings += _checks(contract, inputs, resolved)
        cached = ContractCheck(
            component_id=cid,
            digest=digest,
            context=context,
            findings=tuple(findings),
            dependencies=tuple(resolved),
            corrections=tuple(corrections),
        )
        if cache is not None:
            cache.put(cached)
    cycle, cycle_findings = dependency_cycle(contract, inputs, cached)
    if not cycle:
        return cached
    return ContractCheck(
        component_id=cid,
        digest=digest,
        context=context,
        findings=(*cycle_findings, *cached.findings),
        dependencies=cached.dependencies,
        corrections=cached.corrections,
        cycle=tuple(cycle),
    )


def validate_contract_incremental(
    contract: ComponentContract,
    existing_contracts: Mapping[str, ComponentContract],
    source_tree: Path | None,
    *,
    tree: DecompositionTree | None = None,
    importable: Importable = unchecked,
    quality: QualityMode = QualityMode.WARN,
    cache: ValidationCache | None = None,
) -> list[ValidationFinding]:
    """Validate a single contract as soon as it is authored (seed 000, 2.2).

    Type references resolve (own types, dependencies' types, builtins); internal
    dependencies have contracts in ``existing_contracts``; external ones resolve in
    ``source_tree`` or are ``importable``; the new dependencies close no cycle with
    ``existing_contracts`` (and the tree's own edges). Without a tree, the known
    component ids are those of ``existing_contracts`` and this contract.
    """
    ids = list(tree.nodes) if tree is not None else [*existing_contracts, contract.component_id]
    inputs = CheckInputs(
        names=NameIndex(ids),
        existing=existing_contracts,
        tree=tree,
        source_tree=source_tree,
        importable=importable,
        quality=quality,
        edges=accepted_edges(tree, existing_contracts),
    )
    return list(check_contract(contract, inputs, cache=cache).findings)


def accepted_edges(
    tree: DecompositionTree | None, contracts: Mapping[str, ComponentContract]
) -> dict[str, list[str]]:
    """What each component waits for: the tree's edges plus the contracts' dependencies
    (read as component ids)."""
    edges = implementation_edges(tree) if tree is not None else {c: [] for c in contracts}
    names = NameIndex(tree.nodes if tree is not None else contracts)
    for cid, contract in contracts.items():
        known = edges.setdefault(cid, [])
        for raw in contract.dependencies:
            match = names.match(raw)
            if match is not None and match.component_id != cid and match.component_id not in known:
                known.append(match.component_id)
    return edges


def _context(inputs: CheckInputs, resolved: Sequence[ResolvedDependency]) -> str:
    doc = {
        "ids": inputs.names.fingerprint,
        "quality": inputs.quality.value,
        "tree": inputs.tree is not None,
        "deps": {
            d.component_id: contract_digest(inputs.existing[d.component_id])
            for d in resolved
            if d.kind is DependencyKind.INTERNAL and d.contract_exists
        },
        "external": {
            d.component_id: [d.importable, str(d.resolved_path or "")]
            for d in resolved
            if d.kind is DependencyKind.EXTERNAL
        },
    }
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:16]


def _checks(
    contract: ComponentContract, inputs: CheckInputs, resolved: Sequence[ResolvedDependency]
) -> list[ValidationFinding]:
    cid = contract.component_id
    paths = field_paths(contract)
    findings: list[ValidationFinding] = []
    missing = False
    for dep in resolved:
        path = paths.get(dep.written, "dependencies")
        if dep.kind is DependencyKind.INTERNAL:
            if not dep.contract_exists:
                missing = True
                findings.append(
                    finding(
                        cid,
                        Severity.ERROR,
                        Rule.DEPENDENCY,
                        path,
                        f"depends on component {dep.component_id!r}, which has no contract "
                        "yet: a contract may only use the interfaces of contracts that exist",
                    )
                )
            continue
        problem = external_problem(dep, inputs)
        if problem:
            severity = Severity.WARNING if problem.startswith("could not") else Severity.ERROR
            findings.append(finding(cid, severity, Rule.DEPENDENCY, path, problem))
    if not missing:
        # With a dependency's contract missing, its types are unknown: checked next time.
        dependency_types = {
            d.component_id: frozenset(t.name for t in inputs.existing[d.component_id].types)
            for d in resolved
            if d.kind is DependencyKind.INTERNAL
        }
        external = frozenset(d.component_id for d in resolved if d.kind is DependencyKind.EXTERNAL)
        findings += check_type_references(contract, dependency_types, external)
    if inputs.tree is not None:
        internal = [
            (paths.get(d.written, "dependencies"), d.component_id)
            for d in resolved
            if d.kind is DependencyKind.INTERNAL
        ]
        findings += locality_findings(inputs.tree, cid, internal)
    findings += apply_quality_mode(audit_contract_quality(contract), inputs.quality)
    return findings
