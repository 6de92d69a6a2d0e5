"""Reading Pact projects as Pact wrote them: real pact-bench records, layouts, closures."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from pact_workers.errors import InputError
from scheduler.pactimport import import_closure, read_pact_project, resolve_pact_dir
from tests.conftest import shared_data
from tests.pactlayout import pact_project_from_example


def pact_bench_layout(condition: str, root: Path) -> Path:
    """A Pact project laid out from pact-bench's recorded 2012_D run (its files as Pact
    wrote them: the tree, the contract and the contract tests' recorded results)."""
    source = shared_data("pact-bench", "2012_D", condition)
    pact = root / ".pact"
    (pact / "decomposition").mkdir(parents=True)
    shutil.copyfile(source / "tree.json", pact / "decomposition" / "tree.json")
    contract = pact / "contracts" / "fibonacci_words"
    contract.mkdir(parents=True)
    shutil.copyfile(source / "interface.json", contract / "interface.json")
    impl = pact / "implementations" / "fibonacci_words"
    impl.mkdir(parents=True)
    shutil.copyfile(source / "test_results.json", impl / "test_results.json")
    return root


@pytest.mark.parametrize(
    ("condition", "counts"), [("base", (58, 57, 1, 0)), ("research", (94, 94, 0, 0))]
)
def test_pact_bench_records_are_read_unchanged(
    condition: str, counts: tuple[int, int, int, int], tmp_path: Path
) -> None:
    project = read_pact_project(pact_bench_layout(condition, tmp_path))
    component = project.components["fibonacci_words"]
    recorded = component.recorded
    assert recorded is not None
    assert (recorded.total, recorded.passed, recorded.failed, recorded.errors) == counts
    assert recorded.skipped == 0  # a field Pact does not write
    assert component.contract is not None and component.contract.functions
    if condition == "base":
        (failure,) = recorded.failure_details
        assert failure.test_id == "::TestCountOverlapping::test_single_char_count"


def test_a_pact_project_is_found_from_its_directory_or_its_dot_pact(
    example: Path, tmp_path: Path
) -> None:
    root = pact_project_from_example(example, tmp_path / "p")
    assert resolve_pact_dir(root) == resolve_pact_dir(root / ".pact") == root / ".pact"
    with pytest.raises(InputError, match="not a Pact project"):
        resolve_pact_dir(tmp_path)


def test_a_components_tests_see_the_sources_of_everything_it_imports(
    example: Path, tmp_path: Path
) -> None:
    project = read_pact_project(pact_project_from_example(example, tmp_path / "p"))
    assert import_closure(project, "tokens") == []
    assert import_closure(project, "parser") == ["ast_nodes", "tokens"]
    assert len(import_closure(project, "calculator")) == 9
