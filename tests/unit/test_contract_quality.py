"""Contract quality (seed 000, 5.1 anti-cliché, 5.2 side effects, 5.3 budgets' model)."""

from __future__ import annotations

import json

from pact_workers.models.contract import ComponentContract, SideEffectKind
from pact_workers.verify import BUDGET_SPEC, BUDGET_TESTS, budget_files
from scheduler.settings import Settings
from scheduler.validation import (
    VAGUE_PATTERNS,
    QualityMode,
    Rule,
    Severity,
    audit_contract_specificity,
    audit_side_effects,
)
from tests.conftest import shared_data
from tests.contracts import contract, function


def test_flags_entire_class_of() -> None:
    vague = contract("a", functions=[function(description="prevents the entire class of failures")])
    (warning,) = audit_contract_specificity(vague)
    assert warning.severity is Severity.WARNING and warning.rule is Rule.SPECIFICITY
    assert "'entire class of'" in warning.message


def test_flags_best_practice() -> None:
    vague = contract("a", invariants=["state handling follows best practices"])
    (warning,) = audit_contract_specificity(vague)
    assert warning.path == "invariants[0]" and "'best practice'" in warning.message


def test_clean_contract_no_warnings() -> None:
    clean = contract(
        "a",
        invariants=["len(result) == len(text) for every input text"],
        functions=[
            function(
                preconditions=["text is not empty"],
                postconditions=["result >= 1"],
                error_cases=[
                    {"name": "empty", "condition": "text == ''", "error_type": "ValueError"}
                ],
            )
        ],
    )
    assert audit_contract_specificity(clean) == []
    assert audit_side_effects(clean) == []


def test_warning_includes_field_path() -> None:
    vague = contract(
        "a",
        functions=[
            function(),
            function(
                "b",
                error_cases=[
                    {"name": "e", "condition": "bad input, etc.", "error_type": "ValueError"}
                ],
            ),
        ],
    )
    (warning,) = audit_contract_specificity(vague)
    assert warning.path == "functions[1].error_cases[0].condition"
    assert str(warning).startswith("functions[1].error_cases[0].condition: vague phrase 'etc.'")


def test_every_vague_pattern_is_searched_in_every_claim() -> None:
    phrases = [
        "entire class of",
        "best practice",
        "industry standard",
        "works on my machine",
        "scalable and maintainable",
        "robust and reliable",
        "clean architecture",
        "properly handle",
        "as needed",
        "and more",
        "etc.",
    ]
    assert len(phrases) == len(VAGUE_PATTERNS)
    for phrase in phrases:
        assert any(p.search(f"it is {phrase}") for p in VAGUE_PATTERNS), phrase
    everywhere = contract(
        "a",
        description="as needed",
        requires=["as needed"],
        types=[
            {
                "name": "T",
                "kind": "struct",
                "description": "as needed",
                "fields": [
                    {
                        "name": "f",
                        "type_ref": "int",
                        "description": "as needed",
                        "validators": [
                            {"kind": "range", "expression": "f > 0", "error_message": "as needed"}
                        ],
                    }
                ],
            }
        ],
        functions=[
            function(
                inputs=[{"name": "x", "type_ref": "int", "description": "as needed"}],
                preconditions=["as needed"],
                postconditions=["as needed"],
            )
        ],
    )
    paths = {w.path for w in audit_contract_specificity(everywhere)}
    assert paths == {
        "description",
        "requires[0]",
        "types[0].description",
        "types[0].fields[0].description",
        "types[0].fields[0].validators[0].error_message",
        "functions[0].inputs[0].description",
        "functions[0].preconditions[0]",
        "functions[0].postconditions[0]",
    }


def test_pure_function_declares_none() -> None:
    pure = contract("a", functions=[function(side_effects=[{"kind": "none"}])])
    (fn,) = pure.functions
    assert [e.kind for e in fn.declared_effects] == [SideEffectKind.NONE]
    assert audit_side_effects(pure) == []


def test_file_writer_declares_writes() -> None:
    writer = contract(
        "a",
        functions=[
            function(
                "save_state",
                output_type="None",
                side_effects=[{"kind": "writes_file", "target": "state.json"}],
            )
        ],
    )
    (fn,) = writer.functions
    assert SideEffectKind.WRITES_FILE in {e.kind for e in fn.declared_effects}
    assert fn.declared_effects[0].target == "state.json"
    assert audit_side_effects(writer) == []
    # Pact's own field for structured effects counts the same.
    pact_form = contract(
        "a",
        functions=[
            function(
                side_effects=[],
                structured_side_effects=[{"kind": "writes_file", "target": "state.json"}],
            )
        ],
    )
    assert audit_side_effects(pact_form) == []


def test_idempotent_with_write_warns() -> None:
    writer = contract(
        "a",
        functions=[
            function(idempotent=True, side_effects=[{"kind": "writes_file", "target": "out"}])
        ],
    )
    (warning,) = audit_side_effects(writer)
    assert warning.severity is Severity.WARNING and warning.path == "functions[0].idempotent"


def test_empty_side_effects_rejected() -> None:
    empty = contract("a", functions=[function(side_effects=[])])
    (error,) = audit_side_effects(empty)
    assert error.severity is Severity.ERROR and error.rule is Rule.SIDE_EFFECTS
    assert error.path == "functions[0].side_effects" and "([])" in error.message


def test_free_text_side_effects_of_an_older_contract_load_and_are_reported() -> None:
    old = contract("a", functions=[function(side_effects=["writes the cache file"])])
    (fn,) = old.functions
    assert fn.free_text_effects == ["writes the cache file"] and fn.declared_effects == []
    (error,) = audit_side_effects(old)
    assert "free text" in error.message


def test_none_beside_other_effects_and_a_missing_target_warn() -> None:
    odd = contract(
        "a", functions=[function(side_effects=[{"kind": "none"}, {"kind": "network_call"}])]
    )
    paths = sorted(w.path for w in audit_side_effects(odd))
    assert paths == ["functions[0].side_effects", "functions[0].side_effects[1].target"]


def test_the_26_stigmergy_contracts_load_unchanged() -> None:
    files = sorted(shared_data("stigmergy", "contracts").glob("*/history/*.json"))
    assert len(files) == 26
    for path in files:
        raw = json.loads(path.read_text())
        loaded = ComponentContract.model_validate(raw)
        for i, fn in enumerate(loaded.functions):
            assert fn.free_text_effects == raw["functions"][i]["side_effects"]
            assert fn.performance_budget is None


def test_contract_quality_is_a_pact_yaml_key_defaulting_to_warn() -> None:
    assert Settings().contract_quality is QualityMode.WARN
    assert Settings.model_validate({"contract_quality": "block"}).contract_quality is (
        QualityMode.BLOCK
    )


def test_performance_budget_optional() -> None:
    (fn,) = contract("a").functions
    assert fn.performance_budget is None
    assert budget_files(contract("a")) == {}


def test_latency_budget_generates_test() -> None:
    timed = contract(
        "adder", functions=[function("add", performance_budget={"p95_latency_ms": 100})]
    )
    files = budget_files(timed)
    tests = files[BUDGET_TESTS].decode()
    assert "def test_add_p95_latency_within_100_ms():" in tests
    assert "budget.check_latency('add', 100)" in tests
    assert json.loads(files[BUDGET_SPEC]) == {"module": "adder", "functions": ["add"]}


def test_complexity_stored_but_not_verified() -> None:
    documented = contract("a", functions=[function(performance_budget={"complexity": "O(n)"})])
    (fn,) = documented.functions
    assert fn.performance_budget is not None and fn.performance_budget.complexity == "O(n)"
    assert budget_files(documented) == {}
