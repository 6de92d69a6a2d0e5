"""What the CLI commands do, as keyword-only functions (testable without the CLI).

Every function validates all of its input before it writes anything: a bad
tree, settings file or option raises an :class:`InputError` and leaves the
disk untouched.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from importlib import resources
from pathlib import Path
from typing import Any

from pact_workers.agents.base import Agent
from pact_workers.agents.factory import AGENTS, agent_options, build_agent
from pact_workers.agents.replay import load_replay_script
from pact_workers.artifacts import ArtifactStore, DirectoryBlobStore
from pact_workers.errors import InputError, RunDirError
from pact_workers.fleet.blobs import RedisBlobStore
from pact_workers.fleet.connection import check_redis_url, redis_from_url
from pact_workers.fleet.tiered import TieredBlobStore
from pact_workers.models.environment import EnvironmentSpec
from pact_workers.models.tree import load_tree
from pact_workers.sandbox.base import Sandbox, SandboxRequest
from pact_workers.sandbox.local import LocalSandbox
from scheduler.audit import AuditLog
from scheduler.executors.base import Executor
from scheduler.executors.celery import CeleryExecutor
from scheduler.executors.local import LocalExecutor
from scheduler.metrics import SchedulerMetrics
from scheduler.project import ProjectDir
from scheduler.rebuild import read_state_json, rebuild_state, validate_state_consistency
from scheduler.registry import RunEntry, list_runs, submit_trees
from scheduler.resume import compute_resume_strategy, execute_resume
from scheduler.run import Listener, RunController, load_state, start_run
from scheduler.service import SchedulerService
from scheduler.settings import Settings, load_settings
from scheduler.state import RunState, RunStatus

SANDBOXES = ("local", "docker")
EXAMPLE = "calculator"


def make_agent(
    name: str,
    *,
    replay_dir: Path | None,
    settings: Settings | None = None,
    sandbox: Sandbox | None = None,
) -> tuple[Agent, dict[str, str]]:
    """The agent ``name`` and the options a run records for it (never secrets).

    ``sandbox`` is the run's: a ``command`` backend runs its agent there.
    """
    if name not in AGENTS:
        raise InputError(f"unknown agent {name!r}; choose one of: {', '.join(AGENTS)}")
    if name == "replay":
        if replay_dir is None:
            raise InputError("--agent replay needs --replay-dir DIR (a directory of artifacts)")
        if not replay_dir.is_dir():
            raise InputError(f"--replay-dir {replay_dir}: no such directory")
    settings = settings or Settings()
    options = agent_options(
        name,
        settings.agents,
        replay_dir=str(replay_dir.resolve()) if replay_dir else None,
        prices=settings.prices,
    )
    return build_agent(name, options, sandbox=sandbox), options


def make_sandbox(name: str) -> Sandbox:
    if name == "local":
        return LocalSandbox()
    if name == "docker":
        from pact_workers.sandbox.docker import DockerSandbox

        return DockerSandbox.from_env()
    raise InputError(f"unknown sandbox {name!r}; choose one of: {', '.join(SANDBOXES)}")


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
        _check_environment(settings)
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


def worker_argv(
    *,
    broker_url: str,
    roles: str,
    concurrency: int,
    pool: str,
    loglevel: str,
    lease_ttl_s: float = 10.0,
) -> list[str]:
    """The ``celery worker`` arguments for ``pact worker``; sets the broker for the app."""
    from pact_workers.app import QUEUES

    wanted = [r.strip() for r in roles.split(",") if r.strip()]
    unknown = [r for r in wanted if r not in QUEUES]
    if not wanted or unknown:
        raise InputError(
            f"--roles: unknown role(s) {', '.join(unknown) or '(none given)'}; choose from "
            + ", ".join(QUEUES)
        )
    if concurrency < 1:
        raise InputError(f"--concurrency must be at least 1, got {concurrency}")
    if pool not in {"prefork", "threads", "solo"}:
        raise InputError(f"--pool {pool!r}: choose prefork, threads or solo")
    if not 1.0 <= lease_ttl_s <= 600.0:
        raise InputError(f"--lease-ttl must be between 1 and 600 seconds, got {lease_ttl_s}")
    os.environ["PACT_BROKER_URL"] = check_redis_url(broker_url)
    os.environ["PACT_LEASE_TTL_S"] = str(lease_ttl_s)
    return [
        "worker",
        "--queues",
        ",".join(QUEUES[r] for r in wanted),
        "--concurrency",
        str(concurrency),
        "--pool",
        pool,
        "--loglevel",
        loglevel,
        "--task-events",
        "--hostname",
        f"pact-{os.getpid()}@%h",
    ]


EXECUTORS = ("local", "celery")


def check_executor(name: str, broker_url: str | None) -> str | None:
    """Validate --executor and --broker together; returns the broker URL to use."""
    if name not in EXECUTORS:
        raise InputError(f"unknown executor {name!r}; choose one of: {', '.join(EXECUTORS)}")
    if name == "celery":
        if not broker_url:
            raise InputError("--executor celery needs --broker redis://HOST:PORT/DB")
        return check_redis_url(broker_url)
    return None


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
        _check_environment(settings)
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


@contextmanager
def example_dir(name: str = EXAMPLE) -> Iterator[Path]:
    """The bundled example as a real directory (package data may live in a zip)."""
    ref = resources.files("scheduler") / "examples" / name
    with resources.as_file(ref) as path:
        yield Path(path)


def run_demo(
    *, directory: Path | None, workers: int = 4, listener: Listener | None = None
) -> tuple[Path, RunState]:
    """Run the bundled example with the replay agent into a fresh directory."""
    if directory is None:
        directory = Path(tempfile.mkdtemp(prefix="pact-demo-"))
    elif directory.exists() and (not directory.is_dir() or any(directory.iterdir())):
        raise RunDirError(f"{directory}: the demo needs a new or empty directory")
    with example_dir() as example:
        project_dir = directory
        tree_copy = project_dir / "tree.json"
        state = None
        try:
            project_dir.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(example / "tree.json", tree_copy)
            state = run_tree(
                tree_path=tree_copy,
                project_dir=project_dir,
                replay_dir=example / "replay",
                workers=workers,
                listener=listener,
            )
        finally:
            if state is None and not ProjectDir(project_dir).has_run():
                shutil.rmtree(project_dir, ignore_errors=True)
    return project_dir, state


Check = tuple[str, str, bool, str]  # section, what, passed, detail or how to fix it


def doctor_checks(
    *, project_dir: Path, sandbox: str = "local", broker_url: str | None = None
) -> list[Check]:
    """Everything a run needs, checked: the environment, Docker, the sandbox image, Redis.

    Docker and the sandbox image are checked always but count as failures only for
    ``--sandbox docker``; Redis only when a broker URL is given.
    """
    if sandbox not in SANDBOXES:
        raise InputError(f"unknown sandbox {sandbox!r}; choose one of: {', '.join(SANDBOXES)}")
    settings = load_settings(ProjectDir(project_dir).settings_path)
    env = settings.environment
    checks: list[Check] = []
    python = env.resolve_python()
    checks.append(
        (
            "environment",
            f"python interpreter {env.python_path!r}",
            python is not None,
            python or "not on PATH: set environment.python_path in pact.yaml to an absolute path",
        )
    )
    checks.append(
        (
            "environment",
            "PATH inherited from the parent",
            env.inherit_path,
            env.path_value() if env.inherit_path else f"PATH is {env.path_value()}",
        )
    )
    missing = set(env.validate_environment())
    for tool in env.required_tools:
        found = shutil.which(tool, path=env.path_value())
        checks.append(
            (
                "environment",
                f"required tool {tool!r}",
                tool not in missing,
                found
                or "not found: install it or add its directory to environment.extra_path_dirs",
            )
        )
    checks += _docker_checks(env, required=sandbox == "docker")
    if broker_url:
        redis_check = _redis_check(broker_url)
        checks.append(redis_check)
        if redis_check[2]:
            checks.append(_workers_check(broker_url))
    return checks


def _docker_checks(env: EnvironmentSpec, *, required: bool) -> list[Check]:
    from pact_workers.errors import PactError as _PactError
    from pact_workers.sandbox.docker import DockerSandbox, connect_from_env
    from pact_workers.sandbox.images import default_base_image

    def check(what: str, ok: bool, detail: str) -> Check:
        # Docker problems are only failures for a project that uses the Docker sandbox.
        return (
            "docker",
            what,
            ok or not required,
            detail
            if ok
            else (detail if required else f"{detail} (only needed for --sandbox docker)"),
        )

    try:
        client = connect_from_env(timeout_s=5)
    except (ImportError, _PactError) as exc:
        return [check("Docker engine", False, f"{exc}")]
    try:
        version = client.version().get("Version", "?")
        out = [check("Docker engine", True, f"version {version}")]
        base = default_base_image()
        try:
            client.images.get(base)
            out.append(check(f"sandbox base image {base!r}", True, "present"))
        except Exception:
            out.append(
                check(
                    f"sandbox base image {base!r}",
                    False,
                    "missing: run sandbox_images/build-base.sh (no registry needed), or set "
                    "PACT_SANDBOX_BASE_IMAGE to an image with python3 (e.g. python:3.11-slim)",
                )
            )
            return out
        if required:
            sandbox = DockerSandbox(client, sweep=False)
            try:
                tag = sandbox.image_for(env)
                result = sandbox.run(
                    SandboxRequest(
                        command=["{python}", "-c", "print('ok')"], environment=env, timeout_s=60
                    )
                )
                ok = result.exit_code == 0 and result.stdout.strip() == "ok"
                out.append(
                    check(
                        f"sandbox image {tag!r} runs the interpreter and has the required tools",
                        ok,
                        result.stderr.strip()[-300:] or "ok",
                    )
                )
            except _PactError as exc:
                out.append(check("sandbox image for this environment", False, str(exc)))
        return out
    finally:
        client.close()


#: The roles a run dispatches to (the trace analyst runs inside an implementer's attempt).
PIPELINE_ROLES = ("contract_author", "test_author", "code_author", "integrator")


def fleet_workers(broker_url: str) -> dict[str, dict[str, Any]]:
    """The live workers of the fleet (their heartbeats): worker id -> what they report.

    Raises:
        InputError: a malformed broker URL.
    """
    from pact_workers.fleet.leases import live_workers

    client = redis_from_url(check_redis_url(broker_url), retry_s=2)
    try:
        return live_workers(client)
    finally:
        client.close()


def roles_without_workers(workers: dict[str, dict[str, Any]]) -> list[str]:
    served = {role for info in workers.values() for role in info.get("roles", [])}
    return [role for role in PIPELINE_ROLES if role not in served]


def fleet_warning(broker_url: str) -> str | None:
    """What a run on the fleet will wait for: roles no live worker serves (None: all are
    served, or the fleet cannot be asked; the run itself reports an unreachable Redis)."""
    try:
        missing = roles_without_workers(fleet_workers(broker_url))
    except Exception:
        return None
    if not missing:
        return None
    return (
        f"no live worker serves {', '.join(missing)}: the run waits until one does "
        f"(start `pact worker --roles {','.join(missing)} --broker URL`)"
    )


def _workers_check(broker_url: str) -> Check:
    workers = fleet_workers(broker_url)
    missing = roles_without_workers(workers)
    if not workers:
        detail = "none: start `pact worker --broker URL` (every role by default)"
    elif missing:
        detail = (
            f"{len(workers)} live; no worker serves {', '.join(missing)}: start "
            f"`pact worker --roles {','.join(missing)} --broker URL`"
        )
    else:
        detail = f"{len(workers)} live, every role served"
    return ("redis", "fleet workers", not missing, detail)


def _redis_check(broker_url: str) -> Check:
    from pact_workers.fleet.connection import redact, wait_for_redis

    try:
        client = redis_from_url(check_redis_url(broker_url), retry_s=2)
    except InputError as exc:
        return ("redis", "broker URL", False, str(exc))
    try:
        wait_for_redis(client, 3)
        info = client.info("server")
        return (
            "redis",
            f"Redis at {redact(broker_url)}",
            True,
            f"version {info.get('redis_version', '?')}",
        )
    except Exception as exc:
        return (
            "redis",
            f"Redis at {redact(broker_url)}",
            False,
            f"{exc}; start redis-server or fix --broker / PACT_BROKER_URL",
        )
    finally:
        client.close()


def _check_environment(settings: Settings) -> None:
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


def make_service(
    *,
    broker_url: str,
    runs_dir: Path,
    max_in_flight: str = "",
    metrics_port: int = 0,
    metrics_addr: str = "127.0.0.1",
) -> SchedulerService:
    """Validate the service's options and build it (it connects to Redis here)."""
    from pact_workers.app import QUEUES

    caps: dict[str, int] = {}
    for part in filter(None, (p.strip() for p in max_in_flight.split(","))):
        role, _, value = part.partition("=")
        if role not in QUEUES or not value.isdigit() or int(value) < 1:
            raise InputError(
                f"--max-in-flight {part!r}: expected role=N with a role of "
                f"{', '.join(QUEUES)} and N >= 1"
            )
        caps[role] = int(value)
    if runs_dir.exists() and not runs_dir.is_dir():
        raise InputError(f"--runs-dir {runs_dir}: exists and is not a directory")
    metrics = None
    if metrics_port:
        metrics = SchedulerMetrics()
        metrics.serve(metrics_port, metrics_addr)
    return SchedulerService(
        broker_url=check_redis_url(broker_url),
        runs_dir=runs_dir,
        role_caps=caps,
        metrics=metrics,
    )


def submit_batch(
    *,
    broker_url: str,
    trees: list[Path],
    priority: int,
    agent: str,
    replay_dir: Path | None,
    sandbox: str = "local",
    settings_path: Path | None = None,
) -> tuple[list[RunEntry], list[str]]:
    """Queue ``trees`` as runs; ``settings_path``: a pact.yaml whose ``agents:`` and
    ``prices:`` configure the agent of every run (nothing else of it applies)."""
    if settings_path is not None and not settings_path.is_file():
        raise InputError(f"--settings {settings_path}: no such file")
    settings = load_settings(settings_path) if settings_path else Settings()
    if agent == "replay":
        if replay_dir is None:
            raise InputError("--agent replay needs --replay-dir DIR (a directory of artifacts)")
        if not replay_dir.is_dir():
            raise InputError(f"--replay-dir {replay_dir}: no such directory")
        load_replay_script(replay_dir)
    elif agent not in AGENTS:
        raise InputError(f"unknown agent {agent!r}; choose one of: {', '.join(AGENTS)}")
    if sandbox not in SANDBOXES:
        raise InputError(f"unknown sandbox {sandbox!r}; choose one of: {', '.join(SANDBOXES)}")
    options = agent_options(
        agent,
        settings.agents,
        replay_dir=str(replay_dir.resolve()) if replay_dir else None,
        prices=settings.prices,
    )
    client = redis_from_url(check_redis_url(broker_url))
    try:
        return submit_trees(
            client,
            trees,
            priority=priority,
            agent=agent,
            agent_options=options,
            sandbox="docker" if sandbox == "docker" else "local",
        )
    finally:
        client.close()


def list_service_runs(*, broker_url: str) -> list[RunEntry]:
    client = redis_from_url(check_redis_url(broker_url))
    try:
        return list_runs(client)
    finally:
        client.close()


def supervise(
    argv: list[str],
    *,
    log: Callable[[str], None],
    max_backoff_s: float = 30.0,
    healthy_after_s: float = 60.0,
) -> int:
    """Run ``argv`` and restart it when it exits with an error, with capped backoff.

    A Celery worker can die of a broker hiccup (an unrecoverable error in the
    transport while Redis restarts), and then it may even exit with status 0; the
    fleet must not shrink because of it. So the child is restarted whenever it
    exits without having been told to: SIGTERM and SIGINT are passed on to it
    and end the supervision.
    """
    stopping = False
    child: subprocess.Popen[bytes] | None = None

    def forward(signum: int, _frame: object) -> None:
        nonlocal stopping
        stopping = True
        if child is not None and child.poll() is None:
            child.send_signal(signum)

    previous = {sig: signal.signal(sig, forward) for sig in (signal.SIGTERM, signal.SIGINT)}
    backoff_s = 1.0
    try:
        while True:
            started = time.monotonic()
            child = subprocess.Popen(argv)
            code = child.wait()
            if stopping:
                return code
            if time.monotonic() - started > healthy_after_s:
                backoff_s = 1.0
            log(f"worker exited with status {code}; restarting in {backoff_s:.0f} s")
            deadline = time.monotonic() + backoff_s
            while time.monotonic() < deadline and not stopping:
                time.sleep(0.1)
            if stopping:
                return code
            backoff_s = min(backoff_s * 2, max_backoff_s)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
