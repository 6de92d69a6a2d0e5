"""The gates' pure parts: dimensions computed from facts, pact.yaml's gates and review
keys, the teachback's shape and the checker's review against a contract."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pact_workers.errors import SettingsError, VerificationError
from pact_workers.models.contract import ComponentContract
from pact_workers.models.teachback import TEACHBACK_FILE, Teachback, parse_teachback
from scheduler.gates.dimensions import ComponentFacts, compute_dimensions, gate_record
from scheduler.gates.settings import DimensionOverride, GateMode, ReviewMode
from scheduler.gates.teachback import TeachbackChecker, TeachbackSubject
from scheduler.settings import load_settings


def contract(
    functions: int, errors_each: int, *, effect: str = "none", deps: int = 0
) -> ComponentContract:
    return ComponentContract.model_validate(
        {
            "component_id": "c",
            "name": "c",
            "description": "d",
            "dependencies": [f"d{i}" for i in range(deps)],
            "functions": [
                {
                    "name": f"f{n}",
                    "description": "f",
                    "output_type": "int",
                    "side_effects": [{"kind": effect}],
                    "error_cases": [
                        {"name": f"e{k}", "condition": "bad", "error_type": "ValueError"}
                        for k in range(errors_each)
                    ],
                }
                for n in range(functions)
            ],
        }
    )


def test_scope_grows_with_functions_error_cases_and_dependencies() -> None:
    small, _ = compute_dimensions(ComponentFacts(contract=contract(3, 2)))  # 9
    medium, _ = compute_dimensions(ComponentFacts(contract=contract(4, 3, deps=2)))  # 18
    large, _ = compute_dimensions(ComponentFacts(contract=contract(8, 4)))  # 40
    huge, _ = compute_dimensions(ComponentFacts(contract=contract(10, 4)))  # 50
    assert [d.scope for d in (small, medium, large, huge)] == [1, 2, 3, 4]


def test_risk_counts_side_effects_and_transitive_dependents() -> None:
    pure, _ = compute_dimensions(ComponentFacts(contract=contract(1, 1)))
    stateful, _ = compute_dimensions(
        ComponentFacts(contract=contract(1, 1, effect="mutates_state"))
    )
    outward, _ = compute_dimensions(ComponentFacts(contract=contract(1, 1, effect="network_call")))
    depended, _ = compute_dimensions(ComponentFacts(contract=contract(1, 1), dependents=4))
    most, reasons = compute_dimensions(
        ComponentFacts(contract=contract(1, 1, effect="writes_file"), dependents=8)
    )
    assert [d.risk for d in (pure, stateful, outward, depended, most)] == [1, 2, 3, 2, 4]
    assert "writes_file" in reasons["risk"] and "8+" in reasons["risk"]


def test_uncertainty_comes_from_findings_and_novelty_from_a_baseline() -> None:
    plain, _ = compute_dimensions(ComponentFacts(contract=contract(1, 1)))
    found, _ = compute_dimensions(ComponentFacts(contract=contract(1, 1), findings=2))
    many, _ = compute_dimensions(ComponentFacts(contract=contract(1, 1), findings=9))
    known, _ = compute_dimensions(ComponentFacts(contract=contract(1, 1), baseline=True))
    unsure, reasons = compute_dimensions(
        ComponentFacts(contract=contract(1, 1), findings=1, low_confidence_answers=2)
    )
    assert (plain.uncertainty, found.uncertainty, many.uncertainty) == (1, 3, 4)
    assert (
        unsure.uncertainty == 3 and "2 low-confidence interview answers" in reasons["uncertainty"]
    )
    assert (plain.novelty, known.novelty) == (2, 1)


def test_before_the_contract_exists_the_tree_stands_in_for_the_scope() -> None:
    dims, reasons = compute_dimensions(ComponentFacts(tree_dependencies=2, children=2))
    assert dims.scope == 2
    assert "no contract yet" in reasons["scope"]


def test_the_gate_record_carries_score_and_gates_from_the_scorer_at_the_boundary() -> None:
    six = gate_record(ComponentFacts(contract=contract(3, 2), dependents=4), mode=GateMode.ADVISORY)
    seven = gate_record(
        ComponentFacts(contract=contract(4, 3), dependents=4), mode=GateMode.ADVISORY
    )
    assert (six.score, six.gates.teachback_mode, six.gates.auditor_required) == (
        6,
        "advisory",
        False,
    )
    assert (seven.score, seven.gates.teachback_mode, seven.gates.auditor_required) == (
        7,
        "blocking",
        True,
    )


def test_an_override_from_pact_yaml_is_recorded_as_such() -> None:
    record = gate_record(
        ComponentFacts(contract=contract(1, 1)),
        mode=GateMode.BLOCKING,
        override=DimensionOverride(risk=4),
    )
    assert record.dimensions.risk == 4
    assert record.computed is not None and record.computed.risk == 1
    assert record.overrides == {"risk": 4}
    assert record.score == 2 + 1 + 1 + 4
    assert "set by pact.yaml" in record.reasons["risk"]


def test_pact_yaml_gates_takes_the_mode_alone_or_with_component_overrides(tmp_path: Path) -> None:
    path = tmp_path / "pact.yaml"
    path.write_text("gates: blocking\nreview: gated\n")
    settings = load_settings(path)
    assert settings.gates.mode is GateMode.BLOCKING and settings.review is ReviewMode.GATED
    path.write_text("gates: {mode: advisory, parser: {risk: 4, scope: 3}}\n")
    settings = load_settings(path)
    assert settings.gates.mode is GateMode.ADVISORY
    assert settings.gates.components["parser"].given() == {"risk": 4, "scope": 3}
    assert load_settings(tmp_path / "missing.yaml").gates.mode is GateMode.ADVISORY


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("gates: strict\n", "gates.mode"),
        ("gates: {parser: {risk: 5}}\n", "risk"),
        ("gates: {parser: {risk: '4'}}\n", "risk"),
        ("gates: {parser: {danger: 2}}\n", "danger"),
        ("review: sometimes\n", "review"),
    ],
)
def test_bad_gates_and_review_keys_are_refused_naming_the_key(
    tmp_path: Path, text: str, named: str
) -> None:
    path = tmp_path / "pact.yaml"
    path.write_text(text)
    with pytest.raises(SettingsError, match=named):
        load_settings(path)


def teachback(**changes: object) -> Teachback:
    doc: dict[str, object] = {
        "component_id": "c",
        "produces": "src/c.py",
        "functions": ["f0", "f1"],
        "error_cases": [
            {"function": "f0", "name": "e0"},
            {"function": "f0", "name": "e1"},
            {"function": "f1", "name": "e0"},
            {"function": "f1", "name": "e1"},
        ],
        "uses": ["d0"],
    }
    doc.update(changes)
    return Teachback.model_validate(doc)


def review(tb: Teachback, allowed: frozenset[str] = frozenset({"d0"})) -> tuple[bool, list[str]]:
    verdict = TeachbackChecker().review(
        TeachbackSubject(teachback=tb, contract=contract(2, 2, deps=1), allowed=allowed)
    )
    return verdict.approved, verdict.findings


def test_a_teachback_naming_every_function_and_error_case_is_approved() -> None:
    assert review(teachback()) == (True, [])


def test_a_teachback_that_omits_an_error_case_is_rejected_naming_it() -> None:
    tb = teachback(
        error_cases=[
            {"function": "f0", "name": "e0"},
            {"function": "f0", "name": "e1"},
            {"function": "f1", "name": "e0"},
        ]
    )
    approved, findings = review(tb)
    assert not approved
    assert findings == ["error case 'e1' of function 'f1' is not named (ValueError when bad)"]


def test_a_teachback_that_misses_a_function_or_reaches_outside_the_scope_is_rejected() -> None:
    approved, findings = review(
        teachback(
            functions=["f0", "f9"],
            error_cases=[
                {"function": "f0", "name": "e0"},
                {"function": "f0", "name": "e1"},
                {"function": "f1", "name": "e0"},
                {"function": "f1", "name": "e1"},
                {"function": "f0", "name": "e7"},
            ],
            uses=["d0", "elsewhere"],
        )
    )
    assert not approved
    assert "function 'f1' is not named" in findings
    assert "function 'f9' is not in the contract (outside the scope)" in findings
    assert "error case 'e7' of function 'f0' is not in the contract" in findings
    assert any("'elsewhere' is outside the scope" in f for f in findings)


@pytest.mark.parametrize(
    ("files", "message"),
    [
        ({}, "no teachback.json"),
        ({TEACHBACK_FILE: b"{"}, "not JSON"),
        ({TEACHBACK_FILE: b'{"component_id": "c"}'}, "produces"),
        ({TEACHBACK_FILE: b'{"component_id": "other", "produces": "x"}'}, "restates component"),
        ({TEACHBACK_FILE: b"x" * (300 * 1024)}, "larger than"),
    ],
)
def test_a_teachback_of_the_wrong_shape_is_refused_saying_why(
    files: dict[str, bytes], message: str
) -> None:
    with pytest.raises(VerificationError, match=message):
        parse_teachback(files, "c")


def test_a_well_formed_teachback_parses() -> None:
    doc = {"component_id": "c", "produces": "src/c.py", "functions": ["f0"]}
    assert parse_teachback({TEACHBACK_FILE: json.dumps(doc).encode()}, "c").functions == ["f0"]
