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
from pact_workers.models.tree import DecompositionTree, find_cycle, implementation_edges
from scheduler.validation.externals import (
    Importable,
    find_in_source_tree,
    is_module_name,
    is_path_name,
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
    MatchRule,
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
    resolved, corrections, findings = _resolve(contract, inputs)
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
    cycle, cycle_findings = _cycle(contract, inputs, cached)
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


def _resolve(
    contract: ComponentContract, inputs: CheckInputs
) -> tuple[list[ResolvedDependency], list[NameCorrection], list[ValidationFinding]]:
    """Read every dependency name as a component id or an external module."""
    cid = contract.component_id
    resolved: dict[str, ResolvedDependency] = {}
    corrections: list[NameCorrection] = []
    findings: list[ValidationFinding] = []
    named = [(f"dependencies[{i}]", d) for i, d in enumerate(contract.dependencies)]
    named += [
        (f"external_dependencies[{i}]", d) for i, d in enumerate(contract.external_dependencies)
    ]
    for path, raw in named:
        match = inputs.names.match(raw)
        where = find_in_source_tree(raw, inputs.source_tree)
        importable = inputs.importable(raw) if is_module_name(raw) else False
        if match is not None and match.rule is MatchRule.AFFIX and (where or importable):
            match = None  # an existing module is not a misspelt component
        if match is None:
            resolved.setdefault(
                raw,
                ResolvedDependency(
                    component_id=raw,
                    kind=DependencyKind.EXTERNAL,
                    resolved_path=where,
                    written=raw,
                    importable=bool(importable),
                ),
            )
            continue
        if match.component_id == cid:
            findings.append(
                _finding(
                    cid,
                    Severity.WARNING,
                    Rule.DEPENDENCY,
                    path,
                    f"{raw!r} names this "
                    "component itself; a component does not depend on itself (ignored)",
                )
            )
            continue
        if match.rule is not MatchRule.EXACT:
            correction = NameCorrection(
                path=path, written=raw, component_id=match.component_id, rule=match.rule.value
            )
            corrections.append(correction)
            findings.append(
                _finding(
                    cid,
                    Severity.WARNING,
                    Rule.NAME_CORRECTION,
                    path,
                    f"{raw!r} is not a component id; read as {match.component_id!r} "
                    f"({match.rule.value}): write the id exactly",
                )
            )
        resolved.setdefault(
            match.component_id,
            ResolvedDependency(
                component_id=match.component_id,
                kind=DependencyKind.INTERNAL,
                contract_exists=match.component_id in inputs.existing,
                written=raw,
            ),
        )
    return list(resolved.values()), corrections, findings


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
    paths = _paths(contract, inputs.names)
    findings: list[ValidationFinding] = []
    missing = False
    for dep in resolved:
        path = paths.get(dep.written, "dependencies")
        if dep.kind is DependencyKind.INTERNAL:
            if not dep.contract_exists:
                missing = True
                findings.append(
                    _finding(
                        cid,
                        Severity.ERROR,
                        Rule.DEPENDENCY,
                        path,
                        f"depends on component {dep.component_id!r}, which has no contract "
                        "yet: a contract may only use the interfaces of contracts that exist",
                    )
                )
            continue
        problem = _external_problem(dep, inputs)
        if problem:
            severity = Severity.WARNING if problem.startswith("could not") else Severity.ERROR
            findings.append(_finding(cid, severity, Rule.DEPENDENCY, path, problem))
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


def _external_problem(dep: ResolvedDependency, inputs: CheckInputs) -> str:
    name = dep.component_id
    if dep.resolved_path is not None or dep.importable:
        return ""
    if not is_module_name(name) and not is_path_name(name):
        return (
            f"{name!r} is neither a component of this tree nor a module name: write a "
            "component id exactly, or a module as a.b.c"
        )
    where = f"under {inputs.source_tree}" if inputs.source_tree is not None else "in a source tree"
    if is_path_name(name):
        return f"external dependency {name!r}: no such file or directory {where}"
    if inputs.importable(name) is None:
        return (
            f"could not check external dependency {name!r}: it is not {where} and its "
            "importability was not checked"
        )
    return (
        f"external dependency {name!r} exists nowhere: it is not a component of this tree, "
        f"not importable in the run's environment and not a module {where}. Fix the name, "
        "add the package to the environment, or drop the dependency"
    )


def _paths(contract: ComponentContract, names: NameIndex) -> dict[str, str]:
    """The field path of each written name (its first occurrence)."""
    paths: dict[str, str] = {}
    for i, raw in enumerate(contract.dependencies):
        paths.setdefault(raw, f"dependencies[{i}]")
    for i, raw in enumerate(contract.external_dependencies):
        paths.setdefault(raw, f"external_dependencies[{i}]")
    return paths


def _cycle(
    contract: ComponentContract, inputs: CheckInputs, check: ContractCheck
) -> tuple[list[str], list[ValidationFinding]]:
    if inputs.edges is None:
        return [], []
    cid = contract.component_id
    known = list(inputs.edges.get(cid, ()))
    new = [d for d in check.internal if d not in known]
    if not new:
        return [], []
    edges = dict(inputs.edges)
    edges[cid] = [*known, *new]
    for dep in new:
        edges.setdefault(dep, [])
    cycle = find_cycle(edges)
    if not cycle:
        return [], []
    on_cycle = next((d for d in new if d in cycle), new[0])
    written = next((d.written for d in check.dependencies if d.component_id == on_cycle), on_cycle)
    path = _paths(contract, inputs.names).get(written, "dependencies")
    finding = _finding(
        cid,
        Severity.ERROR,
        Rule.CYCLE,
        path,
        f"its contract's dependencies {new} create a cycle: " + " -> ".join(cycle),
    )
    return cycle, [finding]


def _finding(
    cid: str, severity: Severity, rule: Rule, path: str, message: str
) -> ValidationFinding:
    return ValidationFinding(
        component_id=cid, severity=severity, rule=rule, path=path, message=message
    )
