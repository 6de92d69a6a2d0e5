"""``pact validate``: check every contract of a run, or of a directory of contracts.

PATH is either a project directory holding a run (its accepted contracts, its tree,
its pact.yaml, and the checks its log recorded as the cache) or a directory of
``<component>/interface.json`` files as Pact writes ``contracts/`` (a component with
no ``interface.json`` is read from its latest ``history/<timestamp>.json``). For a
contracts directory the tree is ``--tree`` or ``../decomposition/tree.json`` when it
exists (without one, ids are the contracts' own and locality is not checked), the
source tree for external dependencies is the directory above it, and importability is
checked with this machine's default environment.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from pact_workers.errors import InputError, PactError
from pact_workers.models.contract import ComponentContract
from pact_workers.models.documents import not_a_directory, read_json_input, validation_problems
from pact_workers.models.environment import EnvironmentSpec
from pact_workers.models.tree import DecompositionTree, load_tree
from pact_workers.probes import import_candidates, probe_imports
from pact_workers.sandbox.local import LocalSandbox
from pact_workers.verify import CONTRACT_FILE
from scheduler.audit import read_events
from scheduler.commands.rundir import check_run_dir
from scheduler.events import ContractChecked, RunStarted
from scheduler.launch import no_run
from scheduler.project import ProjectDir
from scheduler.provenance.drift import DriftFinding, project_drift
from scheduler.settings import load_settings
from scheduler.validation import (
    ContractCheck,
    Importable,
    QualityMode,
    ValidationCache,
    ValidationReport,
    authoring_order,
    validate_contracts,
)

#: Largest contract file read (the stigmergy contracts are up to ~60 KB).
MAX_CONTRACT_BYTES = 4 * 1024 * 1024


@dataclass(frozen=True)
class ValidationRun:
    """A validation's report and what it was made from."""

    report: ValidationReport
    #: Contracts whose check the run's log already held (a batch after a run: all).
    cache_hits: int
    tree: DecompositionTree | None
    quality: QualityMode
    #: How a run's files drifted from its verified baselines (empty for a directory).
    drift: tuple[DriftFinding, ...] = ()


@dataclass(frozen=True)
class _Source:
    contracts: list[ComponentContract]
    tree: DecompositionTree | None
    source_tree: Path
    quality: QualityMode
    environment: EnvironmentSpec
    cache: ValidationCache
    recorded: dict[str, bool]


def validate_path(
    *, path: Path, tree_path: Path | None = None, quality: str | None = None
) -> ValidationRun:
    """Validate every contract under ``path`` (a run's project directory or a contracts
    directory); see the module docstring.

    Raises:
        InputError: ``path`` holds no contracts, a contract or the tree is invalid, or
            a contract names a component the tree does not have.
    """
    if not path.is_dir():
        raise InputError(
            f"{path}: {not_a_directory(path)}; give a run's project directory or a "
            "directory of <component>/interface.json files"
        )
    mode = _quality(quality)
    project = ProjectDir(path)
    source = (
        _from_run(project, tree_path, mode)
        if project.has_run()
        else _from_dir(path, tree_path, mode)
    )
    importable = _importable(source)
    report = validate_contracts(
        source.contracts,
        tree=source.tree,
        source_tree=source.source_tree,
        importable=importable,
        quality=source.quality,
        cache=source.cache,
    )
    return ValidationRun(
        report=report,
        cache_hits=source.cache.hits,
        tree=source.tree,
        quality=source.quality,
        drift=tuple(project_drift(path)) if project.has_run() else (),
    )


def _quality(value: str | None) -> QualityMode | None:
    if value is None:
        return None
    try:
        return QualityMode(value)
    except ValueError:
        raise InputError(f"--contract-quality: {value!r} is not one of warn, block") from None


#: The ``type`` of the events a validation of a run reads from its log.
_READ = tuple(str(kind.model_fields["type"].default) for kind in (RunStarted, ContractChecked))


def _from_run(project: ProjectDir, tree_path: Path | None, mode: QualityMode | None) -> _Source:
    check_run_dir(project)
    settings = load_settings(project.settings_path)
    # Only the two kinds read here are parsed (a 10,000-component log holds 100,000
    # events, and parsing them all took most of this command's time).
    events, _ = read_events(project.audit_path, types=_READ)
    started = next((e for e in events if isinstance(e, RunStarted)), None)
    if started is None:
        events, unreadable = read_events(project.audit_path)  # to say what it holds
        raise no_run(project.audit_path, len(events), unreadable)
    tree = (
        load_tree(tree_path)
        if tree_path is not None
        else DecompositionTree.model_validate(started.tree)
    )
    cache = ValidationCache()
    recorded: dict[str, bool] = {}
    #: Accepted components, in the order of their last acceptance (a dict: moving a
    #: component to the end is O(1), not a pass over every component before it).
    order: dict[str, None] = {}
    for event in events:
        if not isinstance(event, ContractChecked):
            continue
        for dep in event.dependencies:
            if dep.kind == "external":
                recorded[dep.component_id] = dep.importable
        if event.accepted:
            order.pop(event.component_id, None)
            order[event.component_id] = None
            cache.put(
                ContractCheck(
                    component_id=event.component_id,
                    digest=event.digest,
                    context=event.context,
                    findings=tuple(event.findings),
                    dependencies=tuple(event.dependencies),
                    corrections=tuple(event.corrections),
                )
            )
    found = read_contracts(project.contracts_dir, tree) if project.contracts_dir.is_dir() else []
    position = {cid: i for i, cid in enumerate(order)}
    ordered = sorted(
        authoring_order(found, tree), key=lambda c: position.get(c.component_id, len(position))
    )
    return _Source(
        contracts=ordered,
        tree=tree,
        source_tree=project.root,
        quality=mode or settings.contract_quality,
        environment=settings.environment,
        cache=cache,
        recorded=recorded,
    )


def _from_dir(path: Path, tree_path: Path | None, mode: QualityMode | None) -> _Source:
    beside = path.parent / "decomposition" / "tree.json"
    tree = (
        load_tree(tree_path)
        if tree_path is not None
        else (load_tree(beside) if beside.is_file() else None)
    )
    contracts = read_contracts(path, tree)
    if not contracts:
        raise InputError(
            f"{path}: no contracts here (expected <component>/{CONTRACT_FILE} or "
            "<component>/history/<timestamp>.json), and no pact run (.pact/audit.jsonl)"
        )
    return _Source(
        contracts=authoring_order(contracts, tree),
        tree=tree,
        source_tree=path.parent,
        quality=mode or QualityMode.WARN,
        environment=EnvironmentSpec(),
        cache=ValidationCache(),
        recorded={},
    )


def read_contracts(directory: Path, tree: DecompositionTree | None) -> list[ComponentContract]:
    """Every component's contract under ``directory``, oldest authored first.

    Raises:
        InputError: naming the file and the field of a contract that cannot be read,
            or a contract for a component the tree does not have.
    """
    found: list[tuple[str, ComponentContract]] = []
    for folder in sorted(
        p for p in directory.iterdir() if p.is_dir() and not p.name.startswith(".")
    ):
        file, stamp = _contract_file(folder)
        if file is None:
            continue
        contract = read_contract(file, folder.name)
        if tree is not None and contract.component_id not in tree.nodes:
            raise InputError(
                f"{file}: component {contract.component_id!r} is not in the tree; give the "
                "tree these contracts were written for (--tree)"
            )
        found.append((stamp, contract))
    found.sort(key=lambda pair: pair[0])
    return [contract for _, contract in found]


def _contract_file(folder: Path) -> tuple[Path | None, str]:
    """The contract of one component directory and the time it was written ("" if none)."""
    current = folder / CONTRACT_FILE
    if current.exists():
        return current, ""
    history = sorted((folder / "history").glob("*.json")) if (folder / "history").is_dir() else []
    if history:
        return history[-1], history[-1].stem
    return None, ""


def read_contract(file: Path, component_id: str) -> ComponentContract:
    """The contract in ``file``, which lies in the directory of ``component_id``.

    Raises:
        InputError: naming the file (and the field) when it cannot be read as a contract
            (a FIFO or a device is refused, not read), or is another component's.
    """
    _, doc = read_json_input(file, MAX_CONTRACT_BYTES)
    try:
        contract = ComponentContract.model_validate(doc)
    except ValidationError as exc:
        problems = validation_problems(exc, "contract")
        raise InputError(f"{file}: not a contract: {problems}") from None
    if contract.component_id != component_id:
        raise InputError(
            f"{file}: component_id is {contract.component_id!r} but the contract lies in "
            f"the directory of {component_id!r}"
        )
    return contract


def _importable(source: _Source) -> Importable:
    """Importability as the run recorded it, else checked here in one probe."""
    names = sorted(
        {n for c in source.contracts for n in import_candidates(c)} - set(source.recorded)
    )
    probed: dict[str, bool] = {}
    if names:
        try:
            probed = probe_imports(
                LocalSandbox(), names, environment=source.environment, timeout_s=60.0
            )
        except PactError:  # no interpreter, no sandbox: each name is reported as unchecked
            probed = {}
    answers = {**probed, **source.recorded}
    return answers.get
