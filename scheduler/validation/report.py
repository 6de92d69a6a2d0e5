"""Batch validation: every contract of a decomposition, in the order it was authored.

Each contract is checked as the run checked it when it was authored: against the
contracts before it. So the batch's findings are the union of the incremental ones,
and with the run's cache every check is a cache hit (a no-op that must match).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from graphlib import CycleError, TopologicalSorter
from pathlib import Path
from typing import Any

from pact_workers.models.contract import ComponentContract
from pact_workers.models.tree import DecompositionTree
from scheduler.validation.externals import Importable, unchecked
from scheduler.validation.findings import QualityMode, Severity, ValidationFinding
from scheduler.validation.incremental import (
    CheckInputs,
    ContractCheck,
    ValidationCache,
    check_contract,
)
from scheduler.validation.names import NameIndex


@dataclass(frozen=True)
class ValidationReport:
    """The checks of a set of contracts, in the order they were made."""

    checks: tuple[ContractCheck, ...]

    @property
    def findings(self) -> list[ValidationFinding]:
        return [f for check in self.checks for f in check.findings]

    @property
    def errors(self) -> list[ValidationFinding]:
        return [f for f in self.findings if f.severity is Severity.ERROR]

    @property
    def warnings(self) -> list[ValidationFinding]:
        return [f for f in self.findings if f.severity is Severity.WARNING]

    def as_json(self) -> dict[str, Any]:
        return {
            "contracts": len(self.checks),
            "errors": len(self.errors),
            "warnings": len(self.warnings),
            "findings": [f.model_dump(mode="json") for f in self.findings],
            "corrections": [
                {"component_id": c.component_id, **n.model_dump(mode="json")}
                for c in self.checks
                for n in c.corrections
            ],
        }


def authoring_order(
    contracts: Sequence[ComponentContract], tree: DecompositionTree | None
) -> list[ComponentContract]:
    """Dependencies before their dependents (names read as ids), else as given.

    The run accepts a contract only after its dependencies' contracts, so this is an
    order in which the run could have authored them. Contracts in a cycle keep the
    order given (the check of the one that closes the cycle reports it).
    """
    by_id = {c.component_id: c for c in contracts}
    names = NameIndex(tree.nodes if tree is not None else by_id)
    graph: dict[str, list[str]] = {}
    for contract in contracts:
        deps = []
        for raw in contract.dependencies:
            match = names.match(raw)
            if match is not None and match.component_id in by_id:
                deps.append(match.component_id)
        graph[contract.component_id] = [d for d in deps if d != contract.component_id]
    position = {c.component_id: i for i, c in enumerate(contracts)}
    sorter = TopologicalSorter(graph)
    try:
        sorter.prepare()
    except CycleError:
        return list(contracts)
    order: list[str] = []
    while sorter.is_active():
        ready = sorted(sorter.get_ready(), key=position.__getitem__)
        order.extend(ready)
        sorter.done(*ready)
    return [by_id[c] for c in order]


def validate_contracts(
    contracts: Sequence[ComponentContract],
    *,
    tree: DecompositionTree | None = None,
    source_tree: Path | None = None,
    importable: Importable = unchecked,
    quality: QualityMode = QualityMode.WARN,
    cache: ValidationCache | None = None,
) -> ValidationReport:
    """Check each contract in the order given, against those before it.

    With a tree, component ids are the tree's and locality is checked; without one,
    the ids are the contracts' own.
    """
    names = NameIndex(tree.nodes if tree is not None else [c.component_id for c in contracts])
    existing: dict[str, ComponentContract] = {}
    edges: dict[str, list[str]] = (
        {cid: [*node.dependencies, *node.children] for cid, node in tree.nodes.items()}
        if tree is not None
        else {c.component_id: [] for c in contracts}
    )
    if tree is not None:
        edges = {cid: [d for d in deps if d in tree.nodes] for cid, deps in edges.items()}
    checks = []
    for contract in contracts:
        inputs = CheckInputs(
            names=names,
            existing=existing,
            tree=tree,
            source_tree=source_tree,
            importable=importable,
            quality=quality,
            edges=edges,
        )
        check = check_contract(contract, inputs, cache=cache)
        checks.append(check)
        existing[contract.component_id] = contract
        if not check.cycle:
            known = edges.setdefault(contract.component_id, [])
            known.extend(d for d in check.internal if d not in known)
    return ValidationReport(checks=tuple(checks))
