"""Type references: every type a contract names must be defined where it may look.

A type expression (``list[Token]``, ``Optional[Node]``, ``dict[str, float] | None``)
is read as the names in it; quoted literals and numbers are not names. A name is
known when it is one of the contract's own types, a type of an internal dependency's
contract, a Python builtin, a ``typing`` or ``collections.abc`` name, a common
standard-library type (``datetime``, ``Path``, ``UUID``, ``Decimal``...), ``any``, or
a single capital letter (a type variable). A dotted name ``m.T`` is checked against
dependency ``m``'s contract when ``m`` is an internal dependency, and is accepted when
``m`` is a declared external dependency or a standard-library module.
"""

from __future__ import annotations

import builtins
import collections.abc
import re
import sys
import typing
from collections.abc import Iterator, Mapping

from pact_workers.models.contract import ComponentContract
from scheduler.validation.findings import Rule, Severity, ValidationFinding

_EXTRA_TYPES = {
    # Names models write for the builtins, and the standard library's common types.
    "any",
    "None",
    "NoneType",
    "datetime",
    "date",
    "time",
    "timedelta",
    "timezone",
    "tzinfo",
    "Path",
    "PurePath",
    "PosixPath",
    "Decimal",
    "Fraction",
    "UUID",
    "Enum",
    "IntEnum",
    "StrEnum",
    "Flag",
    "IntFlag",
    "deque",
    "defaultdict",
    "OrderedDict",
    "Counter",
    "ChainMap",
    "Pattern",
    "Match",
}

#: Names every contract may use without defining them.
BUILTIN_TYPES = frozenset(
    {name for name, value in vars(builtins).items() if isinstance(value, type)}
    | set(typing.__all__)
    | set(collections.abc.__all__)
    | _EXTRA_TYPES
)

_QUOTED = re.compile(r"'[^']*'|\"[^\"]*\"")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*")


def type_names(expression: str) -> list[str]:
    """The (possibly dotted) names in a type expression, in order, without repeats."""
    bare = _QUOTED.sub(" ", expression)
    return list(dict.fromkeys(_NAME.findall(bare)))


def type_references(contract: ComponentContract) -> Iterator[tuple[str, str]]:
    """(field path, type expression) for every place the contract names a type."""
    for i, spec in enumerate(contract.types):
        for j, field in enumerate(spec.fields):
            yield f"types[{i}].fields[{j}].type_ref", field.type_ref
        if spec.item_type:
            yield f"types[{i}].item_type", spec.item_type
        for k, inner in enumerate(spec.inner_types):
            yield f"types[{i}].inner_types[{k}]", inner
    for i, function in enumerate(contract.functions):
        for j, field in enumerate(function.inputs):
            yield f"functions[{i}].inputs[{j}].type_ref", field.type_ref
        yield f"functions[{i}].output_type", function.output_type


def check_type_references(
    contract: ComponentContract,
    dependency_types: Mapping[str, frozenset[str]],
    external_modules: frozenset[str] = frozenset(),
) -> list[ValidationFinding]:
    """An error for every type name that resolves nowhere.

    Args:
        contract: The contract to check.
        dependency_types: Type names of each internal dependency's contract, by id.
        external_modules: The contract's external dependencies (dotted names whose
            first part is one of these, or one of these, are accepted).
    """
    own = {t.name for t in contract.types}
    known = own | BUILTIN_TYPES
    for names in dependency_types.values():
        known |= names
    heads = {m.split(".")[0] for m in external_modules} | set(external_modules)
    findings: list[ValidationFinding] = []
    for path, expression in type_references(contract):
        for name in type_names(expression):
            problem = _unresolved(name, known, dependency_types, heads)
            if problem:
                findings.append(
                    ValidationFinding(
                        component_id=contract.component_id,
                        severity=Severity.ERROR,
                        rule=Rule.TYPE_REFERENCE,
                        path=path,
                        message=problem,
                    )
                )
    return findings


def _unresolved(
    name: str,
    known: set[str],
    dependency_types: Mapping[str, frozenset[str]],
    external_heads: set[str],
) -> str:
    """Why ``name`` does not resolve, or "" when it does."""
    if name in known or (len(name) == 1 and name.isupper()):
        return ""
    if "." not in name:
        return (
            f"type {name!r} is not defined: define it in this contract's types, take it "
            "from a dependency's contract, or use a builtin type"
        )
    head, _, rest = name.partition(".")
    if head in dependency_types:
        if rest.split(".")[0] in dependency_types[head]:
            return ""
        return f"type {name!r}: the contract of dependency {head!r} defines no type {rest!r}"
    if head in external_heads or head in sys.stdlib_module_names:
        return ""
    return (
        f"type {name!r} is qualified by {head!r}, which is neither a dependency of this "
        "contract nor a standard-library module"
    )
