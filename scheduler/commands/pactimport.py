"""``pact import``: start a run from an existing Pact project, re-using what it produced.

Everything is read and checked before anything is written: the Pact project (every
file it takes, each error naming the file), its contracts with ``pact validate``'s
checks (every finding named by its contract file; they are reported, and the run
checks each contract again as it is offered), and the run's own inputs as ``pact
run`` checks them. The run's tree is Pact's tree with the dependencies its contracts
declare, so that each contract is offered after those it refers to. Then the run
starts: each artifact Pact produced is stored in the run and listed in its import
manifest (:mod:`scheduler.pactimport.manifest`), and the run loop offers it to the
harness in place of an agent's answer. The Pact project is never written.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from pact_workers.errors import InputError, TreeError
from pact_workers.models.tree import DecompositionTree
from pact_workers.models.work import Phase
from scheduler.commands.runs import drive_plan, prepare_run, start_plan
from scheduler.commands.validate import validate_path
from scheduler.interview.recorded import record_interview
from scheduler.journal import Listener
from scheduler.pactimport import PactProject, read_pact_project
from scheduler.pactimport.manifest import ImportedArtifact, ImportManifest, write_manifest
from scheduler.state import RunState, final_phase

__all__ = ["ImportFinding", "ImportPlan", "import_pact", "plan_import"]


@dataclass(frozen=True)
class ImportFinding:
    """One validation finding of an imported contract, with the file it is about."""

    file: str
    severity: str
    where: str
    message: str

    def __str__(self) -> str:
        return f"{self.file}: {self.where}: {self.message}" if self.where else self.message


@dataclass(frozen=True)
class ImportPlan:
    """What an import will offer the harness, checked and not yet written."""

    project: PactProject
    tree: DecompositionTree
    findings: list[ImportFinding]
    #: (component, phase) -> (files, the Pact path they were read from).
    artifacts: dict[tuple[str, Phase], tuple[dict[str, bytes], str]]


def plan_import(path: Path) -> ImportPlan:
    """Read and check the Pact project at ``path``; write nothing.

    Raises:
        InputError: naming the file that cannot be read, or a contract whose declared
            dependencies would close a cycle in the tree.
    """
    project = read_pact_project(path)
    findings: list[ImportFinding] = []
    extra: dict[str, list[str]] = {}
    contracts_dir = project.pact_dir / "contracts"
    if any(c.contract is not None for c in project.components.values()):
        report = validate_path(path=contracts_dir, tree_path=project.tree_file).report
        for check in report.checks:
            extra[check.component_id] = list(check.internal)
        for finding in report.findings:
            file = project.components[finding.component_id].contract_file
            findings.append(
                ImportFinding(
                    file=str(file) if file is not None else finding.component_id,
                    severity=finding.severity.value,
                    where=finding.path,
                    message=finding.message,
                )
            )
    try:
        tree = project.tree.with_dependencies(extra)
    except TreeError as exc:
        raise InputError(
            f"{contracts_dir}: the dependencies the contracts declare cannot be scheduled "
            f"with {project.tree_file}: {exc}"
        ) from None
    artifacts: dict[tuple[str, Phase], tuple[dict[str, bytes], str]] = {}
    for cid, component in project.components.items():
        if component.contract is not None and component.contract_file is not None:
            raw = component.contract_file.read_bytes()
            artifacts[(cid, Phase.CONTRACT)] = (
                {"interface.json": raw},
                str(component.contract_file),
            )
        if component.tests:
            artifacts[(cid, Phase.TEST)] = (
                dict(component.tests),
                str(contracts_dir / cid / "tests"),
            )
        if component.src:
            artifacts[(cid, final_phase(tree, cid))] = (
                dict(component.src),
                str(project.pact_dir / "implementations" / cid / "src"),
            )
    return ImportPlan(project=project, tree=tree, findings=findings, artifacts=artifacts)


def import_pact(
    *,
    pact_path: Path,
    project_dir: Path,
    agent_name: str | None = None,
    replay_dir: Path | None = None,
    workers: int = 4,
    sandbox_name: str = "local",
    listener: Listener | None = None,
    stop: threading.Event | None = None,
    on_plan: Callable[[ImportPlan], None] | None = None,
    executor_name: str = "local",
    broker_url: str | None = None,
) -> tuple[ImportPlan, RunState]:
    """Check everything, start a run in ``project_dir`` re-using the Pact project at
    ``pact_path``, and drive it to its end; see the module docstring. ``on_plan`` is
    shown the checked import just before the run is written (its findings, say).

    Raises:
        InputError: bad input of any kind; nothing was written.
    """
    plan = plan_import(pact_path)
    if plan.project.pact_dir.resolve() == (project_dir / ".pact").resolve():
        raise InputError(
            f"--project {project_dir}: that is the Pact project itself; an import never "
            "writes into it: give a new directory"
        )
    with tempfile.TemporaryDirectory(prefix="pact-import-") as scratch:
        tree_file = Path(scratch) / "tree.json"
        tree_file.write_text(json.dumps(plan.tree.model_dump(mode="json")), encoding="utf-8")
        run = prepare_run(
            tree_path=tree_file,
            project_dir=project_dir,
            agent_name=agent_name,
            replay_dir=replay_dir,
            workers=workers,
            sandbox_name=sandbox_name,
            executor_name=executor_name,
            broker_url=broker_url,
        )
        if on_plan is not None:
            on_plan(plan)
        start_plan(run)
    store = run.project.store()
    manifest = ImportManifest(
        pact_dir=str(plan.project.pact_dir.resolve()),
        artifacts=[
            ImportedArtifact(
                component_id=cid, phase=phase, output=store.put_bundle(files), source=source
            )
            for (cid, phase), (files, source) in sorted(plan.artifacts.items())
        ],
    )
    store.sync()
    write_manifest(run.project.pact, manifest)
    interview = plan.project.interview
    if interview is not None:
        # Pact's interview, as the run's: logged, and shown to the contract authors.
        shutil.copyfile(interview.path, run.project.pact / "decomposition" / "interview.json")
        record_interview(run.project, interview)
    state = drive_plan(run, listener=listener, stop=stop)
    return plan, state
