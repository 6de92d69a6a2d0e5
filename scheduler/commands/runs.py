"""Start, drive, inspect, resume and rebuild one run (what ``pact run``, ``status``,
``resume`` and ``rebuild`` do).

Every function validates all of its input before it writes anything: a bad
tree, settings file or option raises an :class:`InputError` and leaves the
disk untouched.
"""

from __future__ import annotations

from pathlib import Path

from pact_workers.agents.base import Agent
from pact_workers.agents.factory import build_agent
from pact_workers.artifacts import ArtifactStore, DirectoryBlobStore
from pact_workers.errors import InputError, RunDirError
from pact_workers.fleet.blobs import RedisBlobStore
from pact_workers.fleet.tiered import TieredBlobStore
from pact_workers.models.tree import load_tree
from pact_workers.sandbox.base import Sandbox
from scheduler.audit import AuditLog
from scheduler.commands.agents import make_agent, make_sandbox
from scheduler.commands.fleet import check_executor
from scheduler.executors.base import Executor
from scheduler.executors.celery import CeleryExecutor
from scheduler.executors.local import LocalExecutor
from scheduler.launch import load_state, start_run
from scheduler.project import ProjectDir
from scheduler.rebuild import read_state_json, rebuild_state, validate_state_consistency
from scheduler.resume import compute_resume_strategy, execute_resume
from scheduler.run import Listener, RunController
from scheduler.settings import Settings, load_settings
from scheduler.state import RunState, RunStatus


def run_tree(
    *,
    tree_path: Path,
    project_dir: Path,
    agent_name: str = "replay",
    replay_dir: Path | None = None,
    workers: int = 4,
    sandbox_name: str = "local",
    listener: Listener | None = None,
    executor_name: str = "local",
    broker_url: str | None = None,
) -> RunState:
    """Validate everything, start a run in ``project_dir`` and drive it to the end."""
    if workers < 1:
        raise InputError(f"--workers must be at least 1, got {workers}")
    broker_url = check_executor(executor_name, broker_url)
    tree = load_tree(tree_path)
    project = ProjectDir(project_dir)
    if project_dir.exists() and not project_dir.is_dir():
        raise RunDirError(f"--project {project_dir}: exists and is not a directory")
    if project.has_run():
        raise RunDirError(
            f"--project {project_dir}: already holds a run; use `pact status` to see it "
            "or choose another directory"
        )
    settings = load_settings(project.settings_path)
    sandbox = make_sandbox(sandbox_name)
    agent, options = make_agent(
        agent_name, replay_dir=replay_dir, settings=settings, sandbox=sandbox
    )
    if sandbox_name == "local":  # a container's tools are checked in its image, per run
        check_environment(settings)
    start_run(
        project,
        tree,
        tree_bytes=tree_path.read_bytes(),
        settings=settings,
        agent=agent_name,
        agent_options=options,
        sandbox=sandbox.name,
    )
    return drive_run(
        project=project,
        settings=settings,
        agent=agent,
        sandbox=sandbox,
        workers=workers,
        listener=listener,
        executor_name=executor_name,
        broker_url=broker_url,
    )


def drive_run(
    *,
    project: ProjectDir,
    settings: Settings,
    agent: Agent,
    sandbox: Sandbox,
    workers: int,
    listener: Listener | None = None,
    executor_name: str = "local",
    broker_url: str | None = None,
) -> RunState:
    executor: Executor
    if executor_name == "celery":
        assert broker_url is not None
        run_id = load_state(project)[0].run_id
        fleet_executor = CeleryExecutor.single_run(broker_url, run_id, capacity=workers)
        store = ArtifactStore(
            TieredBlobStore(
                DirectoryBlobStore(project.artifacts_dir),
                RedisBlobStore(fleet_executor.fleet.client),
            )
        )
        executor = fleet_executor
    else:
        store = project.store()
        executor = LocalExecutor(workers=workers, agent=agent, sandbox=sandbox, store=store)
    try:
        controller = RunController(
            project, executor=executor, store=store, settings=settings, listener=listener
        )
        return controller.drive()
    finally:
        executor.close()


def read_status(*, project_dir: Path) -> tuple[RunState, list[str]]:
    """The run's state, folded from its audit log, and any warnings about the log."""
    return load_state(ProjectDir(project_dir))


def state_json_problems(*, project_dir: Path) -> list[str]:
    """How state.json and the disk disagree with the audit log (empty: consistent)."""
    on_disk, error = read_state_json(project_dir)
    if on_disk is None:
        return [error or "state.json cannot be read"]
    return validate_state_consistency(on_disk, project_dir)


def resume_run(
    *,
    project_dir: Path,
    from_phase: str | None = None,
    agent_name: str | None = None,
    replay_dir: Path | None = None,
    workers: int = 4,
    sandbox_name: str = "local",
    listener: Listener | None = None,
    executor_name: str = "local",
    broker_url: str | None = None,
) -> tuple[RunState, list[str]]:
    """Resume a failed, paused or interrupted run; returns its final state and what
    was inconsistent on disk when it resumed (each fixed by the resume itself).

    Raises:
        InputError: nothing to resume, another process drives the run, bad options.
    """
    if workers < 1:
        raise InputError(f"--workers must be at least 1, got {workers}")
    broker_url = check_executor(executor_name, broker_url)
    project = ProjectDir(project_dir)
    project.require_run()
    with AuditLog(project.audit_path):
        pass  # fails at once when another pact process holds the run
    state, _ = load_state(project)
    settings = load_settings(project.settings_path)
    new_agent: tuple[str, dict[str, str]] | None = None
    sandbox = make_sandbox(sandbox_name)
    if agent_name is None and replay_dir is None:
        agent = build_agent(state.agent or "replay", dict(state.agent_options), sandbox=sandbox)
    else:
        name = agent_name or state.agent or "replay"
        agent, options = make_agent(name, replay_dir=replay_dir, settings=settings, sandbox=sandbox)
        new_agent = (name, options)
    if sandbox_name == "local":
        check_environment(settings)
    problems = state_json_problems(project_dir=project_dir)
    interrupted = state.status is RunStatus.ACTIVE
    basis = state.model_copy(update={"status": RunStatus.PAUSED}) if interrupted else state
    try:
        strategy = compute_resume_strategy(basis, project, from_phase=from_phase)
    except ValueError as exc:
        raise InputError(f"{project_dir}: cannot resume: {exc}") from exc
    if interrupted:
        basis.pause_reason = "interrupted: the previous pact process stopped before the run ended"
    execute_resume(
        basis,
        strategy,
        inconsistencies=problems,
        original_status="interrupted" if interrupted else None,
        agent=new_agent,
    )
    final = drive_run(
        project=project,
        settings=settings,
        agent=agent,
        sandbox=sandbox,
        workers=workers,
        listener=listener,
        executor_name=executor_name,
        broker_url=broker_url,
    )
    return final, problems


def rebuild_run(*, project_dir: Path, dry_run: bool) -> tuple[RunState, list[str]]:
    """Rebuild state.json from the audit log; returns the state and the inconsistencies
    found in the old state.json (written over unless ``dry_run``)."""
    project = ProjectDir(project_dir)
    rebuilt = rebuild_state(project.root)
    problems = state_json_problems(project_dir=project_dir)
    if not dry_run:
        project.write_state(rebuilt)
    return rebuilt, problems


def check_environment(settings: Settings) -> None:
    env = settings.environment
    if env.resolve_python() is None:
        raise InputError(
            f"environment.python_path {env.python_path!r} is not on PATH; set it in pact.yaml"
        )
    missing = env.validate_environment()
    if missing:
        raise InputError(
            f"required tools not found on PATH: {', '.join(missing)}; install them or list "
            "their directories in environment.extra_path_dirs in pact.yaml"
        )
