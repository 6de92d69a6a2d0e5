"""The fleet side of the command line: workers, the scheduler service, submissions."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import redis

from pact_workers.agents.factory import AGENTS, agent_options
from pact_workers.agents.replay import load_replay_script
from pact_workers.errors import InputError
from pact_workers.files import probe_directory
from pact_workers.fleet.blobs import artifact_ttl_s
from pact_workers.fleet.connection import (
    check_redis_url,
    redact,
    redis_from_url,
    wait_for_redis,
)
from pact_workers.models.documents import not_a_directory
from scheduler.cache.factory import check_cache_env
from scheduler.commands.agents import SANDBOXES
from scheduler.commands.rundir import created_by
from scheduler.executors.packing import max_pack_from_env
from scheduler.ownership import lease_holders
from scheduler.registry import (
    RunEntry,
    check_priority,
    list_runs,
    queue_submissions,
    read_submissions,
)
from scheduler.settings import Settings, load_settings

if TYPE_CHECKING:
    from scheduler.service import SchedulerService


#: The levels ``celery worker --loglevel`` takes (any case).
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL", "FATAL")
#: The most pool processes (or threads) one worker runs: each holds open files and a
#: sandbox, and far more than this exhausts the process's file descriptors.
MAX_CONCURRENCY = 1024


def role_queues(roles: str) -> list[str]:
    """The Celery queues of ``--roles`` (comma-separated role names).

    Raises:
        InputError: none given, or a name that is no role.
    """
    from pact_workers.app import QUEUES

    wanted = [r.strip() for r in roles.split(",") if r.strip()]
    unknown = [r for r in wanted if r not in QUEUES]
    if not wanted or unknown:
        raise InputError(
            f"--roles: unknown role(s) {', '.join(unknown) or '(none given)'}; choose from "
            + ", ".join(QUEUES)
        )
    return [QUEUES[r] for r in wanted]


def check_worker_queues(broker_url: str, roles: str) -> None:
    """Refuse to start a worker over a key by one of its queues' names that is no list
    (:mod:`pact_workers.fleet.queues`). A Redis that does not answer is Celery's to
    wait for, as it does.

    Raises:
        InputError: naming each such key, its type, and how to clear it.
    """
    from pact_workers.fleet.queues import queues_not_lists

    client = redis_from_url(broker_url, retry_s=0.0)
    try:
        found = queues_not_lists(client, role_queues(roles))
    except redis.RedisError:
        return
    finally:
        client.close()
    if found:
        named = ", ".join(f"{name!r} (a Redis {kind})" for name, kind in found)
        raise InputError(
            f"{redact(broker_url)}: {named}: no Celery queue, which must be a list; "
            "Celery fails on it at every poll. Delete it (redis-cli DEL with that name) "
            "if no other program uses it; this worker starts once it is gone"
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
    from pact_workers.tasks import heartbeat_interval_s

    queues = role_queues(roles)
    if not 1 <= concurrency <= MAX_CONCURRENCY:
        raise InputError(
            f"--concurrency must be between 1 and {MAX_CONCURRENCY} processes, got "
            f"{concurrency}; run more workers for more"
        )
    if pool not in {"prefork", "threads", "solo"}:
        raise InputError(f"--pool {pool!r}: choose prefork, threads or solo")
    if loglevel.strip().upper() not in LOG_LEVELS:
        raise InputError(
            f"--loglevel (PACT_LOGLEVEL) {loglevel!r}: choose one of {', '.join(LOG_LEVELS)}"
        )
    if not 1.0 <= lease_ttl_s <= 600.0:
        raise InputError(f"--lease-ttl must be between 1 and 600 seconds, got {lease_ttl_s}")
    artifact_ttl_s()  # PACT_ARTIFACT_TTL_S: refused now, not at the first task
    heartbeat_interval_s()  # PACT_WORKER_HEARTBEAT_S: refused now, not once it runs
    os.environ["PACT_BROKER_URL"] = check_redis_url(broker_url)
    os.environ["PACT_LEASE_TTL_S"] = str(lease_ttl_s)
    return [
        "worker",
        "--queues",
        ",".join(queues),
        "--concurrency",
        str(concurrency),
        "--pool",
        pool,
        "--loglevel",
        loglevel.strip().upper(),
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
        artifact_ttl_s()  # PACT_ARTIFACT_TTL_S: refused now, not mid-run
        max_pack_from_env()  # PACT_MAX_PACK: likewise
        broker_client(broker_url).close()  # unreachable: say so now, not mid-run
        return check_redis_url(broker_url)
    return None


#: The roles a run dispatches to (the trace analyst runs inside an implementer's attempt).
PIPELINE_ROLES = ("contract_author", "test_author", "code_author", "integrator")


#: How long a command waits for the broker before it says it is unreachable.
BROKER_WAIT_S = 3.0


def broker_client(broker_url: str, *, wait_s: float = BROKER_WAIT_S) -> redis.Redis:
    """A client of the fleet's Redis that has answered a PING.

    Raises:
        SettingsError: a malformed URL.
        BrokerUnavailable: no answer within ``wait_s``, naming host and port.
    """
    client = redis_from_url(check_redis_url(broker_url), retry_s=wait_s)
    try:
        wait_for_redis(client, wait_s)
    except BaseException:
        client.close()
        raise
    return client


def fleet_workers(broker_url: str) -> dict[str, dict[str, Any]]:
    """The live workers of the fleet (their heartbeats): worker id -> what they report.

    Raises:
        InputError: a malformed broker URL.
    """
    from pact_workers.fleet.heartbeats import live_workers

    client = broker_client(broker_url)
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


def make_service(
    *,
    broker_url: str,
    runs_dir: Path,
    max_in_flight: str = "",
    metrics_port: int = 0,
    metrics_addr: str = "127.0.0.1",
    lease_ttl_s: float | None = None,
    max_runs: int | None = None,
) -> SchedulerService:
    """Validate the service's options and build it (it connects to Redis here)."""
    # The service's modules (Celery, Prometheus) load only when a service is started.
    from pact_workers.app import QUEUES
    from scheduler.metrics import SchedulerMetrics
    from scheduler.service import DEFAULT_LEASE_TTL_S, MAX_ACTIVE_RUNS, SchedulerService

    lease_ttl_s = DEFAULT_LEASE_TTL_S if lease_ttl_s is None else lease_ttl_s
    max_runs = MAX_ACTIVE_RUNS if max_runs is None else max_runs

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
    if not 1.0 <= lease_ttl_s <= 600.0:
        raise InputError(f"--lease-ttl must be between 1 and 600 seconds, got {lease_ttl_s}")
    if max_runs < 1:
        raise InputError(f"--max-runs must be at least 1, got {max_runs}")
    if not 0 <= metrics_port <= MAX_PORT:
        raise InputError(
            f"--metrics-port must be between 0 (off) and {MAX_PORT}, got {metrics_port}"
        )
    artifact_ttl_s()  # PACT_ARTIFACT_TTL_S: refused now, not when a run is adopted
    max_pack_from_env()  # PACT_MAX_PACK: likewise
    check_cache_env()  # PACT_CACHE_DIR: the lessons store of the runs it ends
    check_runs_dir(runs_dir)
    metrics = None
    if metrics_port:
        metrics = SchedulerMetrics()
        try:
            metrics.serve(metrics_port, metrics_addr)
        except (OSError, UnicodeError) as exc:  # unresolvable (gaierror), in use, not ours
            reason = getattr(exc, "strerror", None) or str(exc)
            raise InputError(
                f"--metrics-addr {metrics_addr!r} --metrics-port {metrics_port}: cannot serve "
                f"metrics there ({reason}); give an address of this machine and a free port"
            ) from None
    return SchedulerService(
        broker_url=check_redis_url(broker_url),
        runs_dir=runs_dir,
        role_caps=caps,
        metrics=metrics,
        lease_ttl_s=lease_ttl_s,
        max_runs=max_runs,
    )


#: The highest TCP port.
MAX_PORT = 65535


def check_runs_dir(runs_dir: Path) -> None:
    """``runs_dir`` is a directory runs can be written into, or can be made one.

    Tried by making it and a directory in it, then removing what the try made: a
    virtual file system such as /proc, a read-only one, or one this user cannot
    write is refused before the service starts, and nothing stays behind.

    Raises:
        InputError: naming ``--runs-dir``, the path and the problem.
    """
    where = f"--runs-dir {runs_dir}"
    existing = runs_dir.absolute()
    while not existing.exists() and existing.parent != existing:
        existing = existing.parent
    if not existing.is_dir():
        raise InputError(f"{where}: cannot be created because {existing} is not a directory")
    created = created_by(runs_dir)
    try:
        runs_dir.mkdir(parents=True, exist_ok=True)
        probe_directory(runs_dir)
    except OSError as exc:
        raise InputError(
            f"{where}: cannot write runs there ({exc.strerror or exc}); choose a directory "
            "you can write"
        ) from None
    finally:
        # Only the empty directories the try made: another service may share the path.
        level = runs_dir.absolute()
        while created is not None:
            try:
                level.rmdir()
            except OSError:
                break
            if level == created:
                break
            level = level.parent


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
            raise InputError(f"--replay-dir {replay_dir}: {not_a_directory(replay_dir)}")
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
    check_priority(priority)
    valid, errors = read_submissions(trees)
    if not valid:
        return [], errors  # nothing to queue: the broker is not needed
    client = broker_client(broker_url)
    try:
        queued = queue_submissions(
            client,
            valid,
            priority=priority,
            agent=agent,
            agent_options=options,
            sandbox="docker" if sandbox == "docker" else "local",
        )
    finally:
        client.close()
    return queued, errors


def list_service_runs(*, broker_url: str) -> list[RunEntry]:
    """Every run of the registry. An active run's owner is the holder of its lease now
    (empty: the lease expired and no scheduler has adopted the run yet)."""
    client = broker_client(broker_url)
    try:
        entries = list_runs(client)
        active = [e.run_id for e in entries if e.state == "active"]
        holders = lease_holders(client, active)
    finally:
        client.close()
    for i, entry in enumerate(entries):
        if entry.run_id in holders:
            holder = holders[entry.run_id]
            entries[i] = entry.model_copy(
                update={
                    "owner": holder.scheduler_id if holder else "",
                    "lease_token": holder.token if holder else entry.lease_token,
                }
            )
    return entries
