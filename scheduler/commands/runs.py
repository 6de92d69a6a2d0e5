"""Start, drive, inspect, resume and rebuild one run (what ``pact run``, ``status``,
``resume`` and ``rebuild`` do).

Every function validates all of its input before it writes anything: a bad
tree, settings file, project directory or option raises an :class:`InputError`
and leaves the disk untouched. :func:`prepare_run` is that validation on its
own (``pact run --dry-run``).
"""

from __future__ import annotations

import logging
import shutil
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pact_workers.agents.base import Agent
from pact_workers.artifacts import ArtifactStore, DirectoryBlobStore
from pact_workers.errors import InputError, RunDirError
from pact_workers.models.tree import DecompositionTree, load_tree
from pact_workers.sandbox.base import Sandbox
from scheduler.audit import AuditLog
from scheduler.cache import (
    ActionCache,
    CacheMode,
    effective_mode,
    embedded_cache,
)
from scheduler.commands.agents import (
    LOCAL_SANDBOX_LIMITS,
    NOOP_NOTE,
    REAL_AGENTS,
    default_agent,
    make_agent,
    make_sandbox,
    missing_api_keys,
)
from scheduler.commands.fleet import check_executor
from scheduler.commands.rundir import check_new_project_dir, created_by
from scheduler.executors.base import Executor
from scheduler.executors.local import LocalExecutor
from scheduler.interview.recorded import FoundInterview, find_interview, record_interview
from scheduler.journal import Listener
from scheduler.launch import load_state, start_run
from scheduler.project import ProjectDir
from scheduler.run import RunController
from scheduler.settings import Settings, load_settings
from scheduler.snapshot import LogMark
from scheduler.state import RunState, phases_for

log = logging.getLogger(__name__)


@dataclass
class RunPlan:
    """A run, validated and ready to start: nothing of it is on disk yet."""

    tree: DecompositionTree
    tree_bytes: bytes
    project: ProjectDir
    settings: Settings
    agent_name: str
    agent: Agent
    agent_options: dict[str, str]
    sandbox: Sandbox
    sandbox_name: str
    executor_name: str
    broker_url: str | None
    workers: int
    #: Things worth saying before the run starts (they do not stop it).
    warnings: list[str] = field(default_factory=list)
    #: The action cache of an embedded run (None: none; a fleet run uses Redis's).
    cache: ActionCache | None = None
    #: The interview beside the tree (``pact plan`` writes it), logged at the start.
    interview: FoundInterview | None = None

    def summary(self) -> dict[str, Any]:
        """What the run would do, for ``pact run --dry-run``."""
        nodes = self.tree.nodes
        depth = {self.tree.root_id: 0}
        todo = [self.tree.root_id]
        while todo:
            cid = todo.pop()
            for child in nodes[cid].children:
                depth[child] = depth[cid] + 1
                todo.append(child)
        return {
            "tree": self.tree.root_id,
            "components": len(nodes),
            "leaves": sum(1 for n in nodes.values() if n.is_leaf),
            "depth": max(depth.values()),
            "work_items": sum(len(phases_for(self.tree, cid)) for cid in nodes),
            "ready_at_start": sum(1 for cid in nodes if not self.tree.internal_dependencies(cid)),
            "project": str(self.project.root),
            "agent": self.agent_name,
            "sandbox": self.sandbox_name,
            "executor": self.executor_name,
            "warnings": list(self.warnings),
        }


#: The most attempts one process runs at once (a thread each); a fleet scales past it.
MAX_WORKERS = 1024


def check_workers(workers: int) -> None:
    """``--workers`` (``PACT_WORKERS``) is a count one process can run at once.

    Raises:
        InputError: below 1 or above :data:`MAX_WORKERS`.
    """
    if workers < 1:
        raise InputError(f"--workers must be at least 1, got {workers}")
    if workers > MAX_WORKERS:
        raise InputError(
            f"--workers must be at most {MAX_WORKERS} (attempts one process runs at once), "
            f"got {workers}; for more, run a fleet (--executor celery) of several workers"
        )


def prepare_run(
    *,
    tree_path: Path,
    project_dir: Path,
    agent_name: str | None = None,
    replay_dir: Path | None = None,
    workers: int = 4,
    sandbox_name: str = "local",
    executor_name: str = "local",
    broker_url: str | None = None,
) -> RunPlan:
    """Validate everything a run needs, in the order a user can fix it; write nothing.

    ``agent_name`` None means the agent ``pact.yaml`` configures, else ``replay``.
    """
    check_workers(workers)
    broker_url = check_executor(executor_name, broker_url)
    tree = load_tree(tree_path)
    project = ProjectDir(project_dir)
    check_new_project_dir(project)
    settings = load_settings(project.settings_path)
    settings.gates.check_components(tree.nodes, str(project.settings_path))
    name = agent_name or default_agent(settings) or "replay"
    sandbox = make_sandbox(sandbox_name)
    agent, options = make_agent(name, replay_dir=replay_dir, settings=settings, sandbox=sandbox)
    require_keys(settings, name, executor_name)
    if sandbox_name == "local":  # a container's tools are checked in its image, per run
        check_environment(settings, project.settings_path)
    warnings = []
    if name == "noop":
        warnings.append(NOOP_NOTE)
    if name in REAL_AGENTS and sandbox_name == "local":
        warnings.append(LOCAL_SANDBOX_LIMITS)
    cache = embedded_cache(settings.cache, name, executor_name, warnings)
    interview = find_interview(tree_path)
    return RunPlan(
        tree=tree,
        tree_bytes=tree_path.read_bytes(),
        project=project,
        settings=settings,
        agent_name=name,
        agent=agent,
        agent_options=options,
        sandbox=sandbox,
        sandbox_name=sandbox_name,
        executor_name=executor_name,
        broker_url=broker_url,
        workers=workers,
        warnings=warnings,
        cache=cache,
        interview=interview,
    )


def start_plan(plan: RunPlan) -> None:
    """Create the run directory of a prepared run; on any failure, leave nothing behind."""
    created = created_by(plan.project.root)
    try:
        plan.project.root.mkdir(parents=True, exist_ok=True)
        start_run(
            plan.project,
            plan.tree,
            tree_bytes=plan.tree_bytes,
            settings=plan.settings,
            agent=plan.agent_name,
            agent_options=plan.agent_options,
            sandbox=plan.sandbox.name,
        )
        if plan.interview is not None:
            record_interview(plan.project, plan.interview)
    except OSError as exc:
        shutil.rmtree(created or plan.project.pact, ignore_errors=True)
        raise RunDirError(
            f"--project {plan.project.root}: cannot write the run there "
            f"({exc.strerror or exc}); choose a directory you can write"
        ) from exc


def run_tree(
    *,
    tree_path: Path,
    project_dir: Path,
    agent_name: str | None = None,
    replay_dir: Path | None = None,
    workers: int = 4,
    sandbox_name: str = "local",
    listener: Listener | None = None,
    executor_name: str = "local",
    broker_url: str | None = None,
    stop: threading.Event | None = None,
) -> RunState:
    """Validate everything, start a run in ``project_dir`` and drive it to the end
    (or until ``stop`` is set: the run is then left interrupted, for ``pact resume``)."""
    plan = prepare_run(
        tree_path=tree_path,
        project_dir=project_dir,
        agent_name=agent_name,
        replay_dir=replay_dir,
        workers=workers,
        sandbox_name=sandbox_name,
        executor_name=executor_name,
        broker_url=broker_url,
    )
    return run_plan(plan, listener=listener, stop=stop)


def run_plan(
    plan: RunPlan, *, listener: Listener | None = None, stop: threading.Event | None = None
) -> RunState:
    """Start a prepared run and drive it to the end (or until ``stop`` is set)."""
    start_plan(plan)
    return drive_plan(plan, listener=listener, stop=stop)


def drive_plan(
    plan: RunPlan, *, listener: Listener | None = None, stop: threading.Event | None = None
) -> RunState:
    """Drive a prepared run that :func:`start_plan` started, with what it was prepared
    with (agent, sandbox, workers, executor, cache)."""
    return drive_run(
        project=plan.project,
        settings=plan.settings,
        agent=plan.agent,
        sandbox=plan.sandbox,
        workers=plan.workers,
        listener=listener,
        executor_name=plan.executor_name,
        broker_url=plan.broker_url,
        stop=stop,
        cache=plan.cache,
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
    stop: threading.Event | None = None,
    cache: ActionCache | None = None,
    opened: RunState | None = None,
    opened_mark: LogMark | None = None,
    audit: AuditLog | None = None,
) -> RunState:
    """Drive a started run; ``cache``: the action cache of an embedded run (a fleet run
    uses the fleet's, in Redis, unless its mode is off). ``opened``: the run's state as
    the caller just loaded it, if it did (a fleet run needs its id and agent; loading a
    large run again takes a second); with ``opened_mark``, the mark of the log it is
    the fold of, and the run loop starts from it while the log still ends there.
    ``audit``: the run's log, open, when the caller holds the run already."""
    executor: Executor
    if executor_name == "celery":
        # The fleet's modules (Celery, redis-py) load only for a fleet run.
        from pact_workers.fleet.blobs import RedisBlobStore
        from pact_workers.fleet.tiered import TieredBlobStore
        from scheduler.cache import RedisActionCache
        from scheduler.executors.celery_executor import CeleryExecutor

        assert broker_url is not None
        if opened is None:
            opened = load_state(project)[0]
        run_id = opened.run_id
        fleet_executor = CeleryExecutor.single_run(broker_url, run_id, capacity=workers)
        if effective_mode(settings.cache, opened.agent) is not CacheMode.OFF:
            cache = RedisActionCache(fleet_executor.fleet.client)
        store = ArtifactStore(
            TieredBlobStore(
                DirectoryBlobStore(project.artifacts_dir, deferred=True),
                RedisBlobStore(fleet_executor.fleet.client),
                deferred=True,
            )
        )
        executor = fleet_executor
    else:
        store = project.store(deferred=True)
        executor = LocalExecutor(workers=workers, agent=agent, sandbox=sandbox, store=store)
    try:
        controller = RunController(
            project,
            executor=executor,
            store=store,
            settings=settings,
            listener=listener,
            stop=stop,
            cache=cache,
            loaded=None if opened is None or opened_mark is None else (opened, opened_mark),
            audit=audit,
        )
        return controller.drive()
    finally:
        if stop is not None and stop.is_set() and isinstance(executor, LocalExecutor):
            executor.close(wait=False)  # attempts in flight are abandoned; resume redoes them
        else:
            executor.close()


def require_keys(settings: Settings, agent_name: str, executor_name: str) -> None:
    """The API keys the run's backends need are set here (on the fleet, keys live in
    the workers' environment, so nothing is checked)."""
    if executor_name == "local":
        missing = missing_api_keys(settings.agents, agent_name)
        if missing:
            raise InputError("; ".join(missing))


def check_environment(settings: Settings, settings_path: Path) -> None:
    """The interpreter, the tools and the pytest plugins ``environment:`` names are here.

    Raises:
        InputError: naming ``settings_path`` (where they are set) and the key.
    """
    env = settings.environment
    where = f"{settings_path}: environment"
    if env.resolve_python() is None:
        raise InputError(
            f"{where}.python_path {env.python_path!r} is not on PATH; set it to an absolute "
            "path, or list its directory in environment.extra_path_dirs"
        )
    missing = env.validate_environment()
    if missing:
        raise InputError(
            f"{where}.required_tools: {', '.join(missing)} not found on PATH; install them "
            "or list their directories in environment.extra_path_dirs"
        )
    python = env.resolve_python()
    assert python is not None
    unknown = env.missing_pytest_plugins(python)
    if unknown:
        raise InputError(
            f"{where}.pytest_plugins: {', '.join(unknown)} is neither an installed pytest "
            f"plugin nor a module {python} can import; install it for that interpreter, or "
            "remove it from the list"
        )
