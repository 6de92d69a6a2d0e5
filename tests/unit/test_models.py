"""The domain models read Pact's own documents unchanged."""

from __future__ import annotations

import json

from pact_workers.models import ComponentContract, TestResults, load_tree
from tests.conftest import shared_data


def test_stigmergy_tree_loads_unchanged() -> None:
    path = shared_data("stigmergy", "decomposition", "tree.json")
    tree = load_tree(path)
    raw = json.loads(path.read_text())
    assert len(tree.nodes) == 27
    assert tree.root_id == raw["root_id"]
    assert len(tree.leaves()) == 19
    for cid, node in raw["nodes"].items():
        assert tree.nodes[cid].model_dump(mode="json", exclude_unset=True) == node


def test_every_stigmergy_contract_parses_and_round_trips() -> None:
    paths = sorted(shared_data("stigmergy", "contracts").glob("*/history/*.json"))
    assert len(paths) == 26
    for path in paths:
        raw = json.loads(path.read_text())
        contract = ComponentContract.model_validate(raw)
        assert contract.model_dump(mode="json", exclude_unset=True) == raw


def test_pact_bench_documents_parse() -> None:
    for condition in ("base", "research"):
        base = shared_data("pact-bench", "2012_D", condition)
        tree = load_tree(base / "tree.json")
        node = tree.nodes["fibonacci_words"]
        assert node.contract is not None and node.test_results is not None
        contract = ComponentContract.model_validate_json((base / "interface.json").read_text())
        assert contract.functions[0].structured_side_effects
        results = TestResults.model_validate_json((base / "test_results.json").read_text())
        assert results.total > 0
    base_results = TestResults.model_validate_json(
        (shared_data("pact-bench", "2012_D", "base") / "test_results.json").read_text()
    )
    assert (base_results.passed, base_results.total, base_results.all_passed) == (57, 58, False)


def test_zero_of_zero_tests_is_not_a_pass() -> None:
    assert not TestResults(total=0, passed=0).all_passed
    assert TestResults(total=3, passed=3).all_passed
    assert not TestResults(total=3, passed=2, failed=1).all_passed
    assert not TestResults(total=2, passed=0, skipped=2).all_passed


def test_yaml_tree_with_the_same_fields_loads_the_same(tmp_path, example) -> None:  # type: ignore[no-untyped-def]
    import yaml

    as_json = load_tree(example / "tree.json")
    raw = json.loads((example / "tree.json").read_text())
    (tmp_path / "tree.yaml").write_text(yaml.safe_dump(raw))
    assert load_tree(tmp_path / "tree.yaml") == as_json
    listed = {"root_id": raw["root_id"], "nodes": list(raw["nodes"].values())}
    (tmp_path / "listed.yml").write_text(yaml.safe_dump(listed))
    assert load_tree(tmp_path / "listed.yml") == as_json
