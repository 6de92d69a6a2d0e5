"""``pact doctor``: everything a run needs, checked, with how to fix what is missing."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Literal, NamedTuple

from pact_workers.errors import InputError
from pact_workers.fleet.connection import check_redis_url, redis_from_url
from pact_workers.models.documents import not_a_directory
from pact_workers.models.environment import EnvironmentSpec
from pact_workers.sandbox.base import SandboxRequest
from scheduler.commands.agents import (
    LOCAL_SANDBOX_LIMITS,
    SANDBOXES,
    default_agent,
    missing_api_keys,
)
from scheduler.commands.fleet import fleet_workers, roles_without_workers
from scheduler.project import ProjectDir
from scheduler.settings import Settings, load_settings


class Check(NamedTuple):
    """One thing checked. ``status``: ``ok``; ``missing`` (a failure: the command exits
    1); ``skip`` (a failure that does not matter for this sandbox); ``warn`` (works, but
    worth knowing)."""

    section: str
    what: str
    status: Literal["ok", "missing", "skip", "warn"]
    detail: str

    @property
    def passed(self) -> bool:
        return self.status != "missing"


def _check(section: str, what: str, ok: bool, detail: str) -> Check:
    return Check(section, what, "ok" if ok else "missing", detail)


def doctor_checks(
    *, project_dir: Path, sandbox: str = "local", broker_url: str | None = None
) -> list[Check]:
    """Everything a run needs, checked: the environment, Docker, the sandbox image, Redis.

    Docker and the sandbox image are checked always but count as failures only for
    ``--sandbox docker``; Redis only when a broker URL is given.
    """
    if sandbox not in SANDBOXES:
        raise InputError(f"unknown sandbox {sandbox!r}; choose one of: {', '.join(SANDBOXES)}")
    if not project_dir.is_dir():  # a typo would check the defaults and say all is well
        raise InputError(
            f"{project_dir}: {not_a_directory(project_dir)}; give the project directory "
            "whose pact.yaml to check (none: the current directory)"
        )
    settings = load_settings(ProjectDir(project_dir).settings_path)
    env = settings.environment
    checks: list[Check] = []
    python = env.resolve_python()
    checks.append(
        _check(
            "environment",
            f"python interpreter {env.python_path!r}",
            python is not None,
            python or "not on PATH: set environment.python_path in pact.yaml to an absolute path",
        )
    )
    checks.append(
        _check(
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
            _check(
                "environment",
                f"required tool {tool!r}",
                tool not in missing,
                found
                or "not found: install it or add its directory to environment.extra_path_dirs",
            )
        )
    checks += _agent_checks(settings)
    if sandbox == "local":
        checks.append(Check("sandbox", "local sandbox", "warn", LOCAL_SANDBOX_LIMITS))
    checks += _docker_checks(env, required=sandbox == "docker")
    if broker_url:
        redis_check = _redis_check(broker_url)
        checks.append(redis_check)
        if redis_check.passed:
            checks.append(_redis_keeping_check(broker_url))
            checks.append(_workers_check(broker_url))
    return checks


def _agent_checks(settings: Settings) -> list[Check]:
    """The API keys the configured backends need, where this command runs."""
    name = default_agent(settings)
    if name is None:
        return [
            Check(
                "agents",
                "backend",
                "ok",
                "none configured in pact.yaml (runs use --agent; see README: Run on a real model)",
            )
        ]
    missing = missing_api_keys(settings.agents, name)
    if not missing:
        return [Check("agents", f"backend {name}", "ok", "every API key it needs is set here")]
    return [
        Check(
            "agents",
            f"backend {name}",
            "missing",
            f"{problem} (fleet workers need it in their own environment)",
        )
        for problem in missing
    ]


def _docker_checks(env: EnvironmentSpec, *, required: bool) -> list[Check]:
    from pact_workers.errors import PactError as _PactError
    from pact_workers.sandbox.docker import DockerSandbox, connect_from_env
    from pact_workers.sandbox.images import default_base_image

    def check(what: str, ok: bool, detail: str) -> Check:
        # Docker problems are only failures for a project that uses the Docker sandbox.
        if ok:
            return Check("docker", what, "ok", detail)
        if required:
            return Check("docker", what, "missing", detail)
        return Check("docker", what, "skip", f"{detail} (only needed for --sandbox docker)")

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
    return _check("redis", "fleet workers", not missing, detail)


def _redis_check(broker_url: str) -> Check:
    from pact_workers.fleet.connection import redact, wait_for_redis

    try:
        client = redis_from_url(check_redis_url(broker_url), retry_s=2)
    except InputError as exc:
        return _check("redis", "broker URL", False, str(exc))
    try:
        wait_for_redis(client, 3)
        info = client.info("server")
        return _check(
            "redis",
            f"Redis at {redact(broker_url)}",
            True,
            f"version {info.get('redis_version', '?')}",
        )
    except Exception as exc:
        return _check(
            "redis",
            f"Redis at {redact(broker_url)}",
            False,
            f"{exc}; start redis-server or fix --broker / PACT_BROKER_URL",
        )
    finally:
        client.close()


def _redis_keeping_check(broker_url: str) -> Check:
    """What Redis keeps and what it may drop: its eviction policy, its persistence, its
    memory, and how long the fleet's artifacts stay in it."""
    from pact_workers.fleet.blobs import artifact_ttl_s

    what = "Redis keeps the fleet's state"
    try:
        ttl = f"artifacts expire {_duration(artifact_ttl_s())} after their last write"
    except InputError as exc:
        return _check("redis", what, False, str(exc))
    client = redis_from_url(check_redis_url(broker_url), retry_s=2)
    try:
        memory, persistence = client.info("memory"), client.info("persistence")
    except Exception as exc:
        return Check("redis", what, "warn", f"INFO could not be read ({exc}); {ttl}")
    finally:
        client.close()
    limit = int(memory.get("maxmemory", 0) or 0)
    used = f"{memory.get('used_memory_human', '?')} used of " + (
        f"{limit / 2**20:.0f} MB (maxmemory)" if limit else "no limit (maxmemory 0)"
    )
    policy = str(memory.get("maxmemory_policy", "?"))
    if policy != "noeviction":
        return _check(
            "redis",
            what,
            False,
            f"maxmemory-policy is {policy}: short of memory, Redis would drop leases, "
            f"queued tasks and results; run it with --maxmemory-policy noeviction "
            f"({used}; {ttl})",
        )
    if not int(persistence.get("aof_enabled", 0) or 0):
        return Check(
            "redis",
            what,
            "warn",
            f"appendonly is off: a restart of Redis loses queued tasks, leases and results "
            f"(runs recover by running attempts again); run it with --appendonly yes "
            f"({used}; {ttl})",
        )
    return _check("redis", what, True, f"{used}; noeviction, appendonly; {ttl}")


def _duration(seconds: int) -> str:
    for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60)):
        if seconds % size == 0 and seconds >= size:
            count = seconds // size
            return f"{count} {unit}{'s' if count > 1 else ''}"
    return f"{seconds} s"
