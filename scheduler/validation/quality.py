"""Contract quality (seed 000, 5.1-5.2): specific wording and declared side effects.

Specificity: every human-readable claim of a contract (its description, invariants,
requirements, each type's and field's description and validator messages, each
function's description, pre- and postconditions, input descriptions and error
conditions) is searched for the phrases of :data:`VAGUE_PATTERNS`. Each hit is a
finding that names the field path and the phrase.

Side effects: every function declares at least one structured effect (``none`` for a
pure function). ``[]`` is an error; so are free-text effects with no structured one
(Pact's form before side effects were declared: they name no kind). ``none`` beside
other effects, an effect other than ``none`` or ``logging`` without a target, and an
idempotent function that writes a file are warnings.

These findings are subject to ``contract_quality`` (see :class:`QualityMode`): under
``warn`` all of them are warnings, under ``block`` all of them are errors.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from pact_workers.models.contract import ComponentContract, SideEffectKind
from scheduler.validation.findings import Rule, Severity, ValidationFinding

VAGUE_PATTERNS: list[re.Pattern[str]] = [
    re.compile(r"entire class of", re.IGNORECASE),
    re.compile(r"best practice", re.IGNORECASE),
    re.compile(r"industry standard", re.IGNORECASE),
    re.compile(r"works on my machine", re.IGNORECASE),
    re.compile(r"scalable and maintainable", re.IGNORECASE),
    re.compile(r"robust and reliable", re.IGNORECASE),
    re.compile(r"clean architecture", re.IGNORECASE),
    re.compile(r"properly handle", re.IGNORECASE),
    re.compile(r"as needed", re.IGNORECASE),
    re.compile(r"and more", re.IGNORECASE),
    re.compile(r"etc\.?\s*$", re.IGNORECASE),
]

#: Effects that need no target to be understood.
_NO_TARGET_NEEDED = frozenset({SideEffectKind.NONE, SideEffectKind.LOGGING})


def claims(contract: ComponentContract) -> Iterator[tuple[str, str]]:
    """(field path, text) for every human-readable claim of the contract."""
    yield "description", contract.description
    for i, text in enumerate(contract.invariants):
        yield f"invariants[{i}]", text
    for i, text in enumerate(contract.requires):
        yield f"requires[{i}]", text
    for i, spec in enumerate(contract.types):
        yield f"types[{i}].description", spec.description
        for j, field in enumerate(spec.fields):
            yield f"types[{i}].fields[{j}].description", field.description
            for k, validator in enumerate(field.validators):
                yield (
                    f"types[{i}].fields[{j}].validators[{k}].error_message",
                    (validator.error_message),
                )
    for i, function in enumerate(contract.functions):
        base = f"functions[{i}]"
        yield f"{base}.description", function.description
        for j, field in enumerate(function.inputs):
            yield f"{base}.inputs[{j}].description", field.description
        for j, text in enumerate(function.preconditions):
            yield f"{base}.preconditions[{j}]", text
        for j, text in enumerate(function.postconditions):
            yield f"{base}.postconditions[{j}]", text
        for j, case in enumerate(function.error_cases):
            yield f"{base}.error_cases[{j}].condition", case.condition


def audit_contract_specificity(contract: ComponentContract) -> list[ValidationFinding]:
    """A warning for every vague phrase, naming its field path and the phrase.

    Findings are suggestions (warnings) unless ``contract_quality: block`` makes them
    errors (:func:`~scheduler.validation.findings.apply_quality_mode`).
    """
    findings: list[ValidationFinding] = []
    for path, text in claims(contract):
        for pattern in VAGUE_PATTERNS:
            hit = pattern.search(text)
            if hit is None:
                continue
            phrase = hit.group(0).strip()
            findings.append(
                _finding(
                    contract,
                    Severity.WARNING,
                    Rule.SPECIFICITY,
                    path,
                    f"vague phrase {phrase!r}: name the concrete input, condition and "
                    "result (e.g. 'raises ValueError when n < 0'), or drop the claim",
                )
            )
    return findings


def audit_side_effects(contract: ComponentContract) -> list[ValidationFinding]:
    """Findings for functions whose side effects are missing or inconsistent."""
    findings: list[ValidationFinding] = []
    for i, function in enumerate(contract.functions):
        path = f"functions[{i}].side_effects"
        declared = function.declared_effects
        kinds = {e.kind for e in declared}
        if not declared:
            if function.free_text_effects:
                message = (
                    f"{function.name!r} describes its side effects only in free text: "
                    'declare each as {"kind": ..., "target": ...} (kinds: '
                    + ", ".join(k.value for k in SideEffectKind)
                    + ")"
                )
            else:
                message = (
                    f"{function.name!r} declares no side effects ([]): a pure function "
                    'declares [{"kind": "none"}], any other declares each effect with '
                    "its target"
                )
            findings.append(_finding(contract, Severity.ERROR, Rule.SIDE_EFFECTS, path, message))
            continue
        if SideEffectKind.NONE in kinds and len(kinds) > 1:
            findings.append(
                _finding(
                    contract,
                    Severity.WARNING,
                    Rule.SIDE_EFFECTS,
                    path,
                    f"{function.name!r} declares 'none' beside other effects: 'none' means "
                    "a pure function and stands alone",
                )
            )
        for j, effect in enumerate(declared):
            if effect.kind not in _NO_TARGET_NEEDED and not effect.target.strip():
                findings.append(
                    _finding(
                        contract,
                        Severity.WARNING,
                        Rule.SIDE_EFFECTS,
                        f"{path}[{j}].target",
                        f"{function.name!r}: a {effect.kind.value} effect names no target "
                        "(the file, service or state it touches)",
                    )
                )
        if function.idempotent and SideEffectKind.WRITES_FILE in kinds:
            findings.append(
                _finding(
                    contract,
                    Severity.WARNING,
                    Rule.SIDE_EFFECTS,
                    f"functions[{i}].idempotent",
                    f"{function.name!r} is declared idempotent but writes a file: say what "
                    "makes a second call leave the same file, or drop idempotent",
                )
            )
    return findings


def audit_contract_quality(contract: ComponentContract) -> list[ValidationFinding]:
    """Specificity and side-effect findings, with their rules' own severities."""
    return [*audit_contract_specificity(contract), *audit_side_effects(contract)]


def _finding(
    contract: ComponentContract, severity: Severity, rule: Rule, path: str, message: str
) -> ValidationFinding:
    return ValidationFinding(
        component_id=contract.component_id,
        severity=severity,
        rule=rule,
        path=path,
        message=message,
    )
