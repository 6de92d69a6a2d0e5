"""Internal and external dependencies (seed 000, 2.1) and incremental validation (2.2)."""

from __future__ import annotations

from pathlib import Path

import pytest

from scheduler.validation import (
    DependencyKind,
    QualityMode,
    Rule,
    Severity,
    ValidationCache,
    authoring_order,
    check_contract,
    validate_contract_incremental,
    validate_contracts,
)
from scheduler.validation.incremental import CheckInputs
from scheduler.validation.names import NameIndex
from tests.contracts import contract, function, tree

SIBLINGS = tree({"root": None, "shaping_schemas": "root", "shaper": "root", "other": "root"})


@pytest.fixture
def source(tmp_path: Path) -> Path:
    (tmp_path / "agents").mkdir()
    (tmp_path / "agents" / "base.py").write_text("BASE = 1\n")
    return tmp_path


def errors(findings: list) -> list:
    return [f for f in findings if f.severity is Severity.ERROR]


def test_external_dep_on_existing_module_passes(source: Path) -> None:
    new = contract("shaper", external=["agents.base"])
    findings = validate_contract_incremental(new, {}, source, tree=SIBLINGS)
    assert errors(findings) == []


def test_external_dep_on_missing_module_fails(source: Path) -> None:
    new = contract("shaper", dependencies=["nonexistent_module"])
    findings = validate_contract_incremental(
        new, {}, source, tree=SIBLINGS, importable=lambda name: False
    )
    (problem,) = errors(findings)
    assert problem.rule is Rule.DEPENDENCY and problem.path == "dependencies[0]"
    assert "'nonexistent_module' exists nowhere" in problem.message


def test_internal_dep_without_contract_fails(source: Path) -> None:
    new = contract("shaper", dependencies=["shaping_schemas"])
    (problem,) = errors(validate_contract_incremental(new, {}, source, tree=SIBLINGS))
    assert problem.path == "dependencies[0]" and "'shaping_schemas'" in problem.message
    assert "no contract" in problem.message
    with_it = {"shaping_schemas": contract("shaping_schemas")}
    assert errors(validate_contract_incremental(new, with_it, source, tree=SIBLINGS)) == []


def test_mixed_internal_external_deps(source: Path) -> None:
    new = contract("shaper", dependencies=["shaping_schemas", "agents.base", "json", "nope"])
    inputs = CheckInputs(
        names=NameIndex(SIBLINGS.nodes),
        existing={"shaping_schemas": contract("shaping_schemas")},
        tree=SIBLINGS,
        source_tree=source,
        importable=lambda name: name == "json",
    )
    check = check_contract(new, inputs)
    kinds = {d.component_id: d.kind for d in check.dependencies}
    assert kinds == {
        "shaping_schemas": DependencyKind.INTERNAL,
        "agents.base": DependencyKind.EXTERNAL,
        "json": DependencyKind.EXTERNAL,
        "nope": DependencyKind.EXTERNAL,
    }
    by_name = {d.component_id: d for d in check.dependencies}
    assert by_name["shaping_schemas"].contract_exists
    assert by_name["agents.base"].resolved_path == Path("agents/base.py")
    assert by_name["json"].importable and by_name["json"].resolved_path is None
    # Each kind judged by its own rule: only the external that exists nowhere fails.
    assert [(f.path, f.rule) for f in check.errors] == [("dependencies[3]", Rule.DEPENDENCY)]


def test_an_unchecked_external_dependency_is_a_warning_not_an_error() -> None:
    findings = validate_contract_incremental(contract("shaper", external=["numpyish"]), {}, None)
    (problem,) = [f for f in findings if f.rule is Rule.DEPENDENCY]
    assert problem.severity is Severity.WARNING and "could not check" in problem.message


def test_a_corrected_name_becomes_an_internal_edge_and_a_recorded_correction() -> None:
    new = contract("shaper", dependencies=["Schemas_Shaping"])
    inputs = CheckInputs(
        names=NameIndex(SIBLINGS.nodes),
        existing={"shaping_schemas": contract("shaping_schemas")},
        tree=SIBLINGS,
    )
    check = check_contract(new, inputs)
    assert check.internal == ["shaping_schemas"] and check.accepted
    (correction,) = check.corrections
    assert (correction.written, correction.component_id, correction.path) == (
        "Schemas_Shaping",
        "shaping_schemas",
        "dependencies[0]",
    )


def test_an_existing_module_is_never_read_as_a_component_by_dropping_a_word(
    source: Path,
) -> None:
    layout = tree({"root": None, "agents_adapter": "root", "user": "root"})
    check = check_contract(
        contract("user", dependencies=["agents"]),
        CheckInputs(names=NameIndex(layout.nodes), existing={}, tree=layout, source_tree=source),
    )
    assert check.external == ["agents"] and check.corrections == ()


def test_incremental_catches_bad_type_ref_immediately() -> None:
    bad = contract("shaper", functions=[function(output_type="list[Schema]")])
    (problem,) = errors(validate_contract_incremental(bad, {}, None, tree=SIBLINGS))
    assert problem.rule is Rule.TYPE_REFERENCE
    assert problem.path == "functions[0].output_type" and "'Schema'" in problem.message
    # The dependency's type resolves once the contract depends on the one defining it.
    schemas = contract("shaping_schemas", types=[{"name": "Schema", "kind": "struct"}])
    fixed = contract(
        "shaper",
        dependencies=["shaping_schemas"],
        functions=[function(output_type="list[Schema]")],
    )
    assert (
        errors(
            validate_contract_incremental(fixed, {"shaping_schemas": schemas}, None, tree=SIBLINGS)
        )
        == []
    )


def test_type_references_accept_builtins_literals_qualified_and_own_types() -> None:
    ok = contract(
        "shaper",
        external=["numpy"],
        types=[{"name": "Mode", "kind": "enum", "variants": ["a", "b"]}],
        functions=[
            function(output_type="dict[str, Optional[Mode]] | None"),
            function("lit", output_type="Literal['x', 'y']"),
            function("arr", output_type="numpy.ndarray"),
            function("when", inputs=[{"name": "at", "type_ref": "datetime.datetime"}]),
            function("tv", output_type="list[T]"),
        ],
    )
    findings = validate_contract_incremental(ok, {}, None, importable=lambda n: n == "numpy")
    assert [f for f in findings if f.rule is Rule.TYPE_REFERENCE] == []


def test_incremental_catches_cycle_with_existing() -> None:
    layout = tree({"root": None, "a": "root", "b": "root"})
    accepted = {"a": contract("a", dependencies=["b"]), "b": contract("b")}
    closing = contract("b", dependencies=["a"])
    (problem,) = errors(
        validate_contract_incremental(closing, {"a": accepted["a"]}, None, tree=layout)
    )
    assert problem.rule is Rule.CYCLE and problem.path == "dependencies[0]"
    assert "a -> b -> a" in problem.message


def test_depending_on_a_child_is_no_cycle_but_on_the_parent_is() -> None:
    layout = tree({"root": None, "p": "root", "c": "p"})
    assert (
        errors(
            validate_contract_incremental(
                contract("p", dependencies=["c"]), {"c": contract("c")}, None, tree=layout
            )
        )
        == []
    )
    (problem,) = errors(
        validate_contract_incremental(
            contract("c", dependencies=["p"]), {"p": contract("p")}, None, tree=layout
        )
    )
    assert problem.rule is Rule.CYCLE


def test_batch_validation_matches_incremental() -> None:
    layout = tree(
        {"root": None, "a": "root", "b": "root", "c": "root", "d": "root"},
        {"b": ["a"], "c": ["b"]},
    )
    authored = [
        contract("a", functions=[function(description="handles it as needed")]),
        contract("b", dependencies=["A"], functions=[function(output_type="Missing")]),
        contract("c", dependencies=["b", "d"]),
        contract("d", dependencies=["c"], external=["nowhere_at_all"]),
    ]
    cache = ValidationCache()
    incremental = []
    existing: dict = {}
    for new in authored:
        incremental += validate_contract_incremental(
            new, existing, None, tree=layout, importable=lambda n: False, cache=cache
        )
        existing[new.component_id] = new
    assert {f.rule for f in incremental} >= {
        Rule.SPECIFICITY,
        Rule.NAME_CORRECTION,
        Rule.TYPE_REFERENCE,
        Rule.DEPENDENCY,
        Rule.CYCLE,
    }
    computed = ValidationCache()
    batch = validate_contracts(authored, tree=layout, importable=lambda n: False, cache=computed)
    assert sorted(map(repr, batch.findings)) == sorted(map(repr, incremental))
    assert computed.hits == 0
    # With the incremental cache, the batch recomputes nothing and finds the same.
    again = validate_contracts(authored, tree=layout, importable=lambda n: False, cache=cache)
    assert again.findings == batch.findings and cache.hits == len(authored)


def test_the_cache_is_keyed_by_what_the_contract_was_checked_against() -> None:
    layout = tree({"root": None, "a": "root", "b": "root"})
    cache = ValidationCache()
    b = contract("b", dependencies=["a"])
    first = validate_contract_incremental(b, {}, None, tree=layout, cache=cache)
    assert errors(first)
    # Same contract, but now its dependency's contract exists: checked again, not reused.
    second = validate_contract_incremental(b, {"a": contract("a")}, None, tree=layout, cache=cache)
    assert errors(second) == [] and cache.hits == 0


def test_quality_findings_follow_the_contract_quality_mode() -> None:
    vague = contract("a", functions=[function(description="handles the entire class of errors")])
    warn = validate_contract_incremental(vague, {}, None)
    block = validate_contract_incremental(vague, {}, None, quality=QualityMode.BLOCK)
    assert [(f.path, f.severity) for f in warn] == [("functions[0].description", Severity.WARNING)]
    assert [(f.path, f.severity) for f in block] == [("functions[0].description", Severity.ERROR)]


def test_authoring_order_puts_dependencies_first_and_keeps_the_given_order_otherwise() -> None:
    given = [contract("c", dependencies=["a"]), contract("b"), contract("a")]
    assert [c.component_id for c in authoring_order(given, None)] == ["b", "a", "c"]
