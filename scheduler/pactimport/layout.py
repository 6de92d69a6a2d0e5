"""Reading a Pact project's ``.pact/`` directory as Pact wrote it, never writing to it.

What is read, per component ``C`` of ``decomposition/tree.json``:

- the contract: ``contracts/C/interface.json``, else the newest
  ``contracts/C/history/<timestamp>.json``;
- the contract tests: every file under ``contracts/C/tests/`` (``contract_test.py``
  and, when Pact wrote it, ``contract_test_suite.json``);
- the implementation: every file under ``implementations/C/src/``;
- the recorded test results: ``implementations/C/test_results.json`` (Pact's
  ``TestResults``; its optional fields are optional here too).

``decomposition/interview.json`` is read when present. Anything that cannot be read
is an :class:`~pact_workers.errors.InputError` naming the file.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from pact_workers.errors import InputError
from pact_workers.models.contract import ComponentContract
from pact_workers.models.documents import (
    not_a_directory,
    read_input_file,
    read_json_input,
    validation_problems,
)
from pact_workers.models.testing import TestResults
from pact_workers.models.tree import DecompositionTree, load_tree

if TYPE_CHECKING:
    from scheduler.interview.recorded import FoundInterview

__all__ = ["PactComponent", "PactProject", "read_pact_project", "resolve_pact_dir"]

#: Largest single file read from a Pact project (tests and sources included).
MAX_FILE_BYTES = 8 * 1024 * 1024
#: Largest JSON document read (contracts, results, the interview).
MAX_JSON_BYTES = 4 * 1024 * 1024
#: Largest number of files read from one component's tests or sources.
MAX_FILES = 2000


@dataclass(frozen=True)
class PactComponent:
    """What a Pact project holds for one component (empty where Pact wrote nothing)."""

    component_id: str
    contract: ComponentContract | None = None
    contract_file: Path | None = None
    #: Paths relative to the component's directory: ``tests/...`` and ``src/...``.
    tests: dict[str, bytes] = field(default_factory=dict)
    src: dict[str, bytes] = field(default_factory=dict)
    recorded: TestResults | None = None
    recorded_file: Path | None = None


@dataclass(frozen=True)
class PactProject:
    """A Pact project's ``.pact/`` directory, read."""

    pact_dir: Path
    tree: DecompositionTree
    tree_file: Path
    components: dict[str, PactComponent]
    interview: FoundInterview | None = None


def resolve_pact_dir(path: Path) -> Path:
    """The ``.pact/`` directory of ``path`` (a Pact project directory, or ``.pact/`` itself).

    Raises:
        InputError: no such directory, or no ``decomposition/tree.json`` in it.
    """
    if not path.is_dir():
        raise InputError(f"{path}: {not_a_directory(path)}; give a Pact project directory")
    candidates = [path / ".pact", path]
    for candidate in candidates:
        if (candidate / "decomposition" / "tree.json").is_file():
            return candidate
    raise InputError(
        f"{path}: not a Pact project (no .pact/decomposition/tree.json, nor "
        "decomposition/tree.json); give the directory that holds .pact/"
    )


def read_pact_project(path: Path) -> PactProject:
    """Read the Pact project at ``path``; see the module docstring.

    Raises:
        InputError: naming the file that cannot be read or is not what Pact writes.
    """
    # Imported here: the command layer imports the run loop, which imports this package.
    from scheduler.commands.validate import read_contracts
    from scheduler.interview.recorded import find_interview

    pact_dir = resolve_pact_dir(path)
    tree_file = pact_dir / "decomposition" / "tree.json"
    tree = load_tree(tree_file)
    contracts_dir = pact_dir / "contracts"
    contracts = (
        {c.component_id: c for c in read_contracts(contracts_dir, tree)}
        if contracts_dir.is_dir()
        else {}
    )
    components: dict[str, PactComponent] = {}
    for cid in tree.nodes:
        recorded_file = pact_dir / "implementations" / cid / "test_results.json"
        components[cid] = PactComponent(
            component_id=cid,
            contract=contracts.get(cid),
            contract_file=_contract_file(contracts_dir / cid) if cid in contracts else None,
            tests=_files(contracts_dir / cid / "tests", "tests"),
            src=_files(pact_dir / "implementations" / cid / "src", "src"),
            recorded=_results(recorded_file) if recorded_file.is_file() else None,
            recorded_file=recorded_file if recorded_file.is_file() else None,
        )
    interview = find_interview(tree_file)
    return PactProject(
        pact_dir=pact_dir,
        tree=tree,
        tree_file=tree_file,
        components=components,
        interview=interview,
    )


def _contract_file(folder: Path) -> Path | None:
    current = folder / "interface.json"
    if current.is_file():
        return current
    history = sorted((folder / "history").glob("*.json")) if (folder / "history").is_dir() else []
    return history[-1] if history else None


def _files(directory: Path, prefix: str) -> dict[str, bytes]:
    """Every regular file under ``directory`` as ``prefix/<relative path>`` (caches and
    compiled files left out: they are not part of what Pact produced)."""
    if not directory.is_dir():
        return {}
    found: dict[str, bytes] = {}
    for file in sorted(directory.rglob("*")):
        if "__pycache__" in file.parts or file.suffix == ".pyc" or not file.is_file():
            continue
        if file.is_symlink():
            raise InputError(f"{file}: a symbolic link; a Pact project holds plain files")
        if len(found) >= MAX_FILES:
            raise InputError(f"{directory}: more than {MAX_FILES} files")
        try:
            found[f"{prefix}/{file.relative_to(directory).as_posix()}"] = read_input_file(
                file, MAX_FILE_BYTES
            )
        except OSError as exc:
            raise InputError(f"{file}: cannot be read ({exc.strerror or exc})") from None
    return found


def _json(file: Path) -> Any:
    return read_json_input(file, MAX_JSON_BYTES)[1]


def _results(file: Path) -> TestResults:
    doc = _json(file)
    try:
        results = TestResults.model_validate(doc)
    except ValidationError as exc:
        problems = validation_problems(exc, "test_results")
        raise InputError(f"{file}: not Pact's test results: {problems}") from None
    if results.passed + results.failed + results.errors > results.total:
        raise InputError(
            f"{file}: passed + failed + errors ({results.passed + results.failed + results.errors})"
            f" exceed total ({results.total})"
        )
    return results
