"""Sandbox containers on the Docker engine: connecting, labels, killing, removing, sweeping,
and telling an out-of-memory kill.

Every sandbox container (and its workspace volume) carries ``pact-fleet=sandbox`` and
the ``host:pid`` of the process that owns it, so a sweep can remove what a dead owner
left behind without touching a live sibling's containers.
"""

from __future__ import annotations

import os
import signal
import socket
import time
import traceback
from collections.abc import Mapping
from typing import Any

from pact_workers.sandbox.archives import SANDBOX_UID, WORKSPACE
from pact_workers.sandbox.base import SandboxRequest
from pact_workers.sandbox.images import SandboxUnavailable, docker_errors

__all__ = [
    "LABEL",
    "LABEL_ENV_VARS",
    "LABEL_ITEM",
    "LABEL_OWNER",
    "LABEL_RUN",
    "LABEL_VALUE",
    "connect_from_env",
    "container_options",
    "docker_exceptions",
    "exit_status",
    "kill_container",
    "oom_killed",
    "owner_id",
    "remove_container",
    "sweep_containers",
]

#: Every sandbox container (and its workspace volume) carries ``pact-fleet=sandbox``.
LABEL = "pact-fleet"
LABEL_VALUE = "sandbox"
LABEL_OWNER = "pact-fleet.owner"
LABEL_RUN = "pact-fleet.run"
LABEL_ITEM = "pact-fleet.item"
#: Request env vars whose values also label the container (for ``docker ps`` triage).
LABEL_ENV_VARS = {"PACT_RUN_ID": LABEL_RUN, "PACT_ITEM_ID": LABEL_ITEM}


#: Size of the /tmp tmpfs of every sandbox container.
TMP_SIZE_MB = 64
#: docker-init (tini) exits 128 + N when the command died of signal N.
_SIGNAL_EXIT_BASE = 128


def container_options(
    base_labels: Mapping[str, str],
    env: Mapping[str, str],
    request: SandboxRequest,
    *,
    engine_cpus: float,
) -> dict[str, Any]:
    """The locked-down options of a sandbox container for ``request`` (see docker.py)."""
    from docker.types import LogConfig, Mount  # type: ignore[import-untyped]

    labels = dict(base_labels)
    for var, label in LABEL_ENV_VARS.items():
        if var in request.environment.env_vars:
            labels[label] = request.environment.env_vars[var]
    memory = f"{request.max_memory_mb}m"
    return {
        "environment": dict(env),
        "working_dir": WORKSPACE,
        "user": f"{SANDBOX_UID}:{SANDBOX_UID}",
        "labels": labels,
        # The workspace: an anonymous volume owned by this container (removed with
        # it), the one writable place besides /tmp.
        "mounts": [Mount(target=WORKSPACE, source=None, type="volume", labels=labels)],
        "read_only": True,
        "tmpfs": {"/tmp": f"rw,nosuid,nodev,size={TMP_SIZE_MB}m,mode=1777"},
        "network_mode": "bridge" if request.network else "none",
        "nano_cpus": max(1, int(min(request.cpus, engine_cpus) * 1e9)),
        # memswap == mem: no swap, so a hog is killed instead of thrashing.
        "mem_limit": memory,
        "memswap_limit": memory,
        "pids_limit": request.max_pids,
        "cap_drop": ["ALL"],
        "security_opt": ["no-new-privileges"],
        # An init as pid 1 reaps orphans and forwards signals; killing it at the
        # timeout takes the whole pid namespace down.
        "init": True,
        "stdin_open": False,
        "tty": False,
        # Output is read from the attach stream; nothing is logged on the host.
        "log_config": LogConfig(type=LogConfig.types.NONE),
    }


def exit_status(code: int, *, timed_out: bool) -> int:
    """Report like ``Popen.returncode`` (and so like the local sandbox): -N for signal N.

    An OOM kill of the command shows as -9 here too; an OOM kill of one of its children
    (the command survived) keeps the command's own exit code.
    """
    if timed_out:
        return -signal.SIGKILL
    if _SIGNAL_EXIT_BASE < code < _SIGNAL_EXIT_BASE + 64:
        return -(code - _SIGNAL_EXIT_BASE)
    return code


def connect_from_env(*, timeout_s: float = 120.0) -> Any:
    """A ``docker.DockerClient`` for the engine ``DOCKER_HOST`` (or the CLI context) names.

    Raises:
        SandboxUnavailable: no engine answers; the message says what to do.
    """
    import docker  # type: ignore[import-untyped]

    try:
        with docker_errors("connecting to the Docker engine"):
            return docker.from_env(timeout=max(1, int(timeout_s)))
    except SandboxUnavailable as exc:
        _close_leaked_sockets(exc)
        raise


def _close_leaked_sockets(exc: BaseException) -> None:
    """Close sockets left open in the frames of a failed connection attempt.

    docker-py's unix-socket transport does not close its socket when ``connect()``
    fails; only the traceback still references it, and it would be finalised (with a
    ResourceWarning) whenever the exception is collected.
    """
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        for frame, _ in traceback.walk_tb(current.__traceback__):
            for value in list(frame.f_locals.values()):
                if isinstance(value, socket.socket):
                    value.close()
        current = current.__cause__ or current.__context__


#: How long the engine's ``oom`` event is waited for when a command died of SIGKILL
#: (exit 137) and the container's OOM flag is false: under load the engine may take
#: the kernel's OOM event after the exit, and Docker 20.10 then logs the event but
#: never sets the flag.
OOM_EVENT_WAIT_S = 1.0


def oom_killed(
    container: Any,
    code: int,
    *,
    timed_out: bool,
    started: float,
    wait_s: float = OOM_EVENT_WAIT_S,
) -> bool:
    """Whether the kernel killed the container's command for its memory limit: the
    engine's ``State.OOMKilled`` (``container.attrs`` as last reloaded), or, for a
    command that died of SIGKILL that the sandbox did not send (not ``timed_out``), an
    ``oom`` event of the container since ``started`` (epoch seconds) within ``wait_s``.
    Neither shows an OOM kill the engine missed altogether (also seen under load)."""
    if timed_out:
        return False
    if container.attrs.get("State", {}).get("OOMKilled"):
        return True
    if code != _SIGNAL_EXIT_BASE + signal.SIGKILL:
        return False
    events = container.client.api.events(
        since=int(started) - 1,
        until=int(time.time() + wait_s) + 1,
        filters={"container": container.id, "event": "oom"},
        decode=True,
    )
    try:
        return any(True for _ in events)
    finally:
        events.close()


def kill_container(container: Any) -> None:
    try:
        container.kill()
    except docker_exceptions().APIError as exc:
        # 409: it exited between the timeout and the kill; nothing left to kill.
        if exc.status_code != 409:
            raise


def remove_container(container: Any) -> None:
    """Remove the container and its workspace volume, also after errors."""
    try:
        container.remove(force=True, v=True)
    except docker_exceptions().NotFound:
        pass
    except Exception:
        # Not raised over the run's own outcome: the next sweep will find it by label.
        pass


def docker_exceptions() -> Any:
    """docker-py's exception module, imported when first needed (it has no type stubs)."""
    import docker.errors  # type: ignore[import-untyped]

    return docker.errors


def owner_id() -> str:
    """``host:pid`` of this process, so a sweep can tell orphans from live siblings."""
    return f"{socket.gethostname()}:{os.getpid()}"


def _owner_alive(owner: str) -> bool:
    host, _, pid = owner.rpartition(":")
    if host != socket.gethostname() or not pid.isdigit():
        return True  # another machine's: not ours to judge
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def sweep_containers(client: Any, *, orphans_only: bool = False) -> int:
    """Remove sandbox containers (label ``pact-fleet=sandbox``) and unused sandbox volumes.

    Args:
        client: a ``docker.DockerClient``.
        orphans_only: keep containers whose owning process (on this host) is alive,
            so a worker that starts does not kill its siblings' runs.

    Returns:
        How many containers were removed.
    """
    removed = 0
    # sparse: the labels come with the list itself; a full listing inspects every
    # container and fails with 404 when a sibling removes one of them meanwhile.
    listed = client.containers.list(
        all=True, sparse=True, filters={"label": f"{LABEL}={LABEL_VALUE}"}
    )
    for container in listed:
        owner = (container.attrs.get("Labels") or {}).get(LABEL_OWNER, "")
        if orphans_only and owner and _owner_alive(owner):
            continue
        try:
            container.remove(force=True, v=True)
            removed += 1
        except docker_exceptions().NotFound:
            pass  # removed by its owner meanwhile
    # Workspace volumes a failed removal left behind; prune spares volumes still in use.
    client.volumes.prune(filters={"label": f"{LABEL}={LABEL_VALUE}"})
    return removed
