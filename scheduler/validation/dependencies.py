"""A contract's dependency names: what each one is (a component of the tree, read
exactly or corrected, or an external module or path), what is wrong with an external
one, the field each was written in, and whether a new dependency closes a cycle.

Part of :func:`scheduler.validation.incremental.check_contract`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pact_workers.models.contract import ComponentContract
from pact_workers.models.tree import find_cycle
from scheduler.validation.externals import find_in_source_tree, is_module_name, is_path_name
from scheduler.validation.findings import NameCorrection, Rule, Severity, ValidationFinding
from scheduler.validation.names import DependencyKind, MatchRule, ResolvedDependency

if TYPE_CHECKING:
    from scheduler.validation.incremental import CheckInputs, ContractCheck

__all__ = [
    "dependency_cycle",
    "external_problem",
    "field_paths",
    "finding",
    "resolve_dependencies",
]


def resolve_dependencies(
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
                finding(
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
                finding(
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


def external_problem(dep: ResolvedDependency, inputs: CheckInputs) -> str:
    """What is wrong with an external dependency ("" when it was found)."""
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


def field_paths(contract: ComponentContract) -> dict[str, str]:
    """The field path of each written name (its first occurrence)."""
    paths: dict[str, str] = {}
    for i, raw in enumerate(contract.dependencies):
        paths.setdefault(raw, f"dependencies[{i}]")
    for i, raw in enumerate(contract.external_dependencies):
        paths.setdefault(raw, f"external_dependencies[{i}]")
    return paths


def dependency_cycle(
    contract: ComponentContract, inputs: CheckInputs, check: ContractCheck
) -> tuple[list[str], list[ValidationFinding]]:
    """The cycle the contract's new internal dependencies close among the accepted
    edges, and its error ([] and [] when none, or when edges are not checked)."""
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
    path = field_paths(contract).get(written, "dependencies")
    found = finding(
        cid,
        Severity.ERROR,
        Rule.CYCLE,
        path,
        f"its contract's dependencies {new} create a cycle: " + " -> ".join(cycle),
    )
    return cycle, [found]


def finding(cid: str, severity: Severity, rule: Rule, path: str, message: str) -> ValidationFinding:
    """One finding about component ``cid``'s contract, at field ``path``."""
    return ValidationFinding(
        component_id=cid, severity=severity, rule=rule, path=path, message=message
    )
