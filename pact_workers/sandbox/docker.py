"""The Docker sandbox: each request runs in a fresh, locked-down, throw-away container.

Same interface and behaviour as :class:`~pact_workers.sandbox.local.LocalSandbox`, with
real isolation: no network unless the request asks for it, CPU / memory (no swap) /
pids limits, user 10001, every capability dropped, no new privileges, a read-only root
filesystem, and a hard timeout that kills the container (its whole process tree).

How files move (nothing is shared with the host, no bind mount):

- ``/workspace`` is an anonymous volume that belongs to the container (created with
  it, pre-populated by the engine from the image's empty ``/workspace``, so owned by
  user 10001). It is the only writable place besides a small ``/tmp`` tmpfs. The
  engine accepts ``put_archive`` into a volume even when the root is read-only, and
  into a container that has not started yet, so the inputs are in place before the
  command's first instruction.
- Outputs come back with ``get_archive`` after the command exited; every tar member is
  checked (no symlinks, no absolute or ``..`` names, only regular files and
  directories) and the total is capped.
- stdout and stderr are read live from the attach stream (the container logs to the
  ``none`` driver, so a chatty command cannot fill the host's disk); only the tails
  are kept, as the local sandbox does.
- The container and its volume are removed after every run, whatever happened
  (``remove(force=True, v=True)`` in a ``finally``), and containers of dead owners are
  swept by label when a sandbox connects.
"""

from __future__ import annotations

import logging
import os
import select
import signal
import socket
import struct
import threading
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any

from pact_workers.errors import EnvironmentSpecError, SandboxError
from pact_workers.models.environment import EnvironmentSpec
from pact_workers.sandbox.archives import (
    SANDBOX_UID,
    WORKSPACE,
    collect_outputs,
    workspace_tar,
)
from pact_workers.sandbox.base import (
    SandboxRequest,
    SandboxResult,
    cap_text,
    safe_relpath,
)
from pact_workers.sandbox.images import (
    SandboxImageMissing,
    SandboxUnavailable,
    default_base_image,
    docker_errors,
    ensure_image,
)

__all__ = [
    "LABEL",
    "LABEL_VALUE",
    "DockerSandbox",
    "SandboxImageMissing",
    "SandboxUnavailable",
    "connect_from_env",
    "sweep_containers",
]

log = logging.getLogger(__name__)

#: Every sandbox container (and its workspace volume) carries ``pact-fleet=sandbox``.
LABEL = "pact-fleet"
LABEL_VALUE = "sandbox"
LABEL_OWNER = "pact-fleet.owner"
LABEL_RUN = "pact-fleet.run"
LABEL_ITEM = "pact-fleet.item"
#: Request env vars whose values also label the container (for ``docker ps`` triage).
LABEL_ENV_VARS = {"PACT_RUN_ID": LABEL_RUN, "PACT_ITEM_ID": LABEL_ITEM}


TMP_SIZE_MB = 64
#: PATH of an image whose config names none (the Debian default).
DEFAULT_IMAGE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
#: How long output may still drain after a kill before the stream is abandoned.
KILL_GRACE_S = 10.0
#: Limits of the cheap container that checks the interpreter and required tools.
CHECK_TIMEOUT_S = 60.0
CHECK_MEMORY_MB = 128
#: docker-init (tini) exits 128 + N when the command died of signal N.
_SIGNAL_EXIT_BASE = 128
_STREAM_HEADER = struct.Struct(">BxxxL")


class DockerSandbox:
    """Runs each request in a new container of the sandbox image for its environment.

    Args:
        client: a ``docker.DockerClient``; containers of dead owners are swept at once.
        connect: instead of ``client``, a function that returns one; it is called on
            the first run (see :meth:`from_env`), and the sweep happens then.
        base_image: what sandbox images are built FROM; default ``PACT_SANDBOX_BASE_IMAGE``
            or ``pact-sandbox-base:bookworm``, read when the first image is needed.
        labels: extra labels for every container (e.g. ``pact-fleet.run``).
        sweep: remove leftover sandbox containers of dead owners on connect.
    """

    name = "docker"

    def __init__(
        self,
        client: Any | None = None,
        *,
        connect: Callable[[], Any] | None = None,
        base_image: str | None = None,
        labels: Mapping[str, str] | None = None,
        sweep: bool = True,
    ) -> None:
        if (client is None) == (connect is None):
            raise TypeError("DockerSandbox needs exactly one of client= or connect=")
        self._connect = connect
        self._owns_client = client is None
        self._client: Any | None = None
        self._base_image = base_image
        self._labels = {
            **(labels or {}),
            LABEL: LABEL_VALUE,
            LABEL_OWNER: _owner_id(),
        }
        self._sweep = sweep
        self._lock = threading.Lock()
        self._images: dict[str, str] = {}
        self._image_paths: dict[str, str] = {}
        self._checked: dict[tuple[str, str, str, tuple[str, ...]], str] = {}
        self._cpus: float | None = None
        if client is not None:
            self._attach(client)

    @classmethod
    def from_env(
        cls,
        *,
        base_image: str | None = None,
        labels: Mapping[str, str] | None = None,
        timeout_s: float = 120.0,
        sweep: bool = True,
    ) -> DockerSandbox:
        """A sandbox on the engine ``DOCKER_HOST`` names (or the local socket).

        Nothing is contacted (nor is docker-py imported) until the first run.
        """
        return cls(
            connect=lambda: connect_from_env(timeout_s=timeout_s),
            base_image=base_image,
            labels=labels,
            sweep=sweep,
        )

    # -- lifecycle ---------------------------------------------------------------------

    def close(self) -> None:
        """Close the client if this sandbox created it."""
        with self._lock:
            client, self._client = self._client, None
        if client is not None and self._owns_client:
            client.close()

    def __enter__(self) -> DockerSandbox:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def _attach(self, client: Any) -> None:
        self._client = client
        if self._sweep:
            # Housekeeping: a sweep that fails (a sibling removed a container first,
            # the engine is busy) must never fail the attempt that triggered it.
            try:
                with docker_errors("sweeping leftover sandbox containers"):
                    sweep_containers(client, orphans_only=True)
            except SandboxError as exc:
                log.warning("sweeping leftover sandbox containers failed: %s", exc)

    def client(self) -> Any:
        """The docker client, connecting (and sweeping) on first use."""
        with self._lock:
            if self._client is None:
                if self._connect is None:
                    raise SandboxError("this DockerSandbox was closed")
                with docker_errors("connecting to the Docker engine"):
                    client = self._connect()
                try:
                    self._attach(client)
                except BaseException:
                    self._client = None
                    client.close()
                    raise
            return self._client

    # -- images and environment --------------------------------------------------------

    def image_for(self, spec: EnvironmentSpec) -> str:
        """The sandbox image tag for ``spec``, built on first use (then cached)."""
        key = spec.model_dump_json()
        tag = self._images.get(key)
        if tag is None:
            tag = ensure_image(
                self.client(), spec, base_image=self._base_image or default_base_image()
            )
            self._images[key] = tag
        return tag

    def _image_path(self, tag: str) -> str:
        path = self._image_paths.get(tag)
        if path is None:
            with docker_errors(f"inspecting sandbox image {tag}"):
                env = self.client().images.get(tag).attrs.get("Config", {}).get("Env") or []
            path = next((e[5:] for e in env if e.startswith("PATH=")), DEFAULT_IMAGE_PATH)
            self._image_paths[tag] = path
        return path

    def _environment(
        self, tag: str, spec: EnvironmentSpec, pythonpath: Sequence[str]
    ) -> tuple[str, dict[str, str]]:
        """The interpreter and the environment for ``spec`` inside ``tag``.

        The interpreter and the required tools are looked up IN the image, with the
        PATH the command will have, once per (image, PATH, interpreter, tools).

        Raises:
            EnvironmentSpecError: the interpreter or a required tool is missing.
        """
        path = spec.path_value({"PATH": self._image_path(tag)})
        env = {
            # The root is read-only: HOME in /tmp keeps dotfiles and caches writable
            # and out of the workspace, whose files are what the caller collects.
            "HOME": "/tmp",
            "LANG": "C.UTF-8",
            "PATH": path,
            **spec.env_vars,
            "PYTHONPATH": ":".join(f"{WORKSPACE}/{p}" for p in pythonpath),
        }
        key = (tag, env["PATH"], spec.python_path, tuple(spec.required_tools))
        python = self._checked.get(key)
        if python is None:
            python = self._check_tools(tag, env["PATH"], spec)
            self._checked[key] = python
        return python, env

    def _check_tools(self, tag: str, path: str, spec: EnvironmentSpec) -> str:
        script = (
            'p=$(command -v "$1") && echo "python=$p" || echo "nopython"; shift; '
            'for t in "$@"; do command -v "$t" >/dev/null 2>&1 || echo "missing=$t"; done'
        )
        request = SandboxRequest(
            command=["/bin/sh", "-c", script, "sh", spec.python_path, *spec.required_tools],
            timeout_s=CHECK_TIMEOUT_S,
            max_memory_mb=CHECK_MEMORY_MB,
            max_pids=32,
        )
        outcome = self._execute(tag, list(request.command), {"PATH": path}, request, {})
        if outcome.exit_code != 0 or outcome.timed_out:
            raise SandboxError(
                f"checking the environment in image {tag} failed (exit {outcome.exit_code}): "
                f"{outcome.stderr_tail.decode('utf-8', 'replace')[-500:]}"
            )
        lines = outcome.stdout_tail.decode("utf-8", "replace").split()
        python = next((line[7:] for line in lines if line.startswith("python=")), None)
        if python is None:
            raise EnvironmentSpecError(
                f"python interpreter {spec.python_path!r} not found in sandbox image {tag} "
                f"(PATH {path}); set environment.python_path in pact.yaml to an absolute "
                "path in the image, or add its directory to environment.extra_path_dirs"
            )
        missing = [line[8:] for line in lines if line.startswith("missing=")]
        if missing:
            raise EnvironmentSpecError(
                f"required tools not found in sandbox image {tag} (PATH {path}): "
                f"{', '.join(missing)}; install them in the image (sandbox_images/python/"
                "Dockerfile) or add their directory to environment.extra_path_dirs in pact.yaml"
            )
        return python

    # -- running -----------------------------------------------------------------------

    def run(self, request: SandboxRequest) -> SandboxResult:
        # Every path is checked before anything is created, as the local sandbox does.
        files = {safe_relpath(p): data for p, data in request.files.items()}
        collect = [safe_relpath(p) for p in request.collect]
        pythonpath = [safe_relpath(p) for p in request.pythonpath]
        tag = self.image_for(request.environment)
        python, env = self._environment(tag, request.environment, pythonpath)
        argv = [python if arg == "{python}" else arg for arg in request.command]
        outcome = self._execute(tag, argv, env, request, files, collect=collect)
        stdout, trunc_out = cap_text(outcome.stdout_tail, request.max_output_bytes)
        stderr, trunc_err = cap_text(outcome.stderr_tail, request.max_output_bytes)
        if outcome.oom_killed:
            separator = "" if not stderr or stderr.endswith("\n") else "\n"
            stderr += f"{separator}killed: out of memory (limit {request.max_memory_mb} MB)\n"
        return SandboxResult(
            exit_code=outcome.exit_code,
            stdout=stdout,
            stderr=stderr,
            duration_s=outcome.duration_s,
            timed_out=outcome.timed_out,
            oom_killed=outcome.oom_killed,
            output_truncated=trunc_out or trunc_err,
            files=outcome.files,
        )

    def _execute(
        self,
        tag: str,
        argv: list[str],
        env: Mapping[str, str],
        request: SandboxRequest,
        files: Mapping[str, bytes],
        *,
        collect: Sequence[str] = (),
    ) -> _Outcome:
        client = self.client()
        container: Any = None
        try:
            with docker_errors(f"creating a sandbox container of {tag}"):
                container = client.containers.create(
                    tag, argv, **self._container_options(env, request)
                )
                if files:
                    container.put_archive(WORKSPACE, workspace_tar(files))
                stream = client.api.attach_socket(
                    container.id, params={"stdout": 1, "stderr": 1, "stream": 1}
                )
            out = _Tail(request.max_output_bytes)
            err = _Tail(request.max_output_bytes)
            with _ClosingStream(stream) as raw, docker_errors("running a sandbox container"):
                container.start()
                started = time.monotonic()
                try:
                    finished = _pump(raw, out, err, deadline=started + request.timeout_s)
                    timed_out = not finished
                    if timed_out:
                        _kill(container)
                        _pump(raw, out, err, deadline=time.monotonic() + KILL_GRACE_S)
                except OSError as exc:  # the engine went away under the attach stream
                    raise SandboxUnavailable(
                        f"lost the output stream of a sandbox container ({exc}); "
                        "is the Docker engine still running?"
                    ) from exc
            with docker_errors("waiting for a sandbox container"):
                status = container.wait()
                duration_s = time.monotonic() - started
                container.reload()
            state = container.attrs.get("State", {})
            exit_code = int(status.get("StatusCode", state.get("ExitCode", -1)))
            oom_killed = bool(state.get("OOMKilled")) and not timed_out
            if exit_code == 127 and b"[FATAL tini" in err.data():
                raise SandboxError(
                    f"cannot start {argv[0]!r}: {err.data().decode('utf-8', 'replace').strip()}"
                )
            with docker_errors("collecting outputs from a sandbox container"):
                collected = collect_outputs(client, container, collect, request.max_collect_bytes)
            return _Outcome(
                exit_code=_exit_code(exit_code, timed_out=timed_out),
                stdout_tail=out.data(),
                stderr_tail=err.data(),
                duration_s=duration_s,
                timed_out=timed_out,
                oom_killed=oom_killed,
                files=collected,
            )
        finally:
            if container is not None:
                _remove(container)

    def _engine_cpus(self) -> float:
        """The engine's CPU count: it refuses a CPU limit above it, so requests are capped."""
        if self._cpus is None:
            with docker_errors("asking the Docker engine for its CPU count"):
                self._cpus = float(self.client().info().get("NCPU") or 1)
        return self._cpus

    def _container_options(self, env: Mapping[str, str], request: SandboxRequest) -> dict[str, Any]:
        from docker.types import LogConfig, Mount  # type: ignore[import-untyped]

        labels = dict(self._labels)
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
            "nano_cpus": max(1, int(min(request.cpus, self._engine_cpus()) * 1e9)),
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


@dataclass(frozen=True)
class _Outcome:
    exit_code: int
    stdout_tail: bytes
    stderr_tail: bytes
    duration_s: float
    timed_out: bool
    oom_killed: bool
    files: dict[str, bytes]


class _Tail:
    """Counts a stream and keeps its last ``limit + 1`` bytes (enough for ``cap_text``)."""

    def __init__(self, limit: int) -> None:
        self.keep = limit + 1
        self.total = 0
        self._buf = bytearray()

    def add(self, data: bytes) -> None:
        self.total += len(data)
        self._buf += data
        if len(self._buf) > 2 * self.keep:  # trim in batches, not on every write
            del self._buf[: -self.keep]

    def data(self) -> bytes:
        return bytes(self._buf[-self.keep :])


def _pump(raw: socket.socket, out: _Tail, err: _Tail, *, deadline: float) -> bool:
    """Demultiplex the attach stream into ``out``/``err`` until EOF (True) or ``deadline``."""
    pending = b""
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return False
        ready, _, _ = select.select([raw], [], [], remaining)
        if not ready:
            return False
        chunk = raw.recv(65536)
        if not chunk:
            return True
        pending += chunk
        while len(pending) >= _STREAM_HEADER.size:
            kind, size = _STREAM_HEADER.unpack_from(pending)
            end = _STREAM_HEADER.size + size
            if len(pending) < end:
                break
            (err if kind == 2 else out).add(pending[_STREAM_HEADER.size : end])
            pending = pending[end:]


class _ClosingStream:
    """The raw socket under docker-py's attach response, closed (both layers) on exit."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream

    def __enter__(self) -> socket.socket:
        raw = getattr(self._stream, "_sock", self._stream)
        raw.settimeout(None)  # select() does the waiting
        return raw  # type: ignore[no-any-return]

    def __exit__(self, *exc: object) -> None:
        raw = getattr(self._stream, "_sock", None)
        self._stream.close()
        if raw is not None:
            raw.close()


def _exit_code(code: int, *, timed_out: bool) -> int:
    """Report like ``Popen.returncode`` (and so like the local sandbox): -N for signal N.

    An OOM kill of the command shows as -9 here too; an OOM kill of one of its children
    (the command survived) keeps the command's own exit code.
    """
    if timed_out:
        return -signal.SIGKILL
    if _SIGNAL_EXIT_BASE < code < _SIGNAL_EXIT_BASE + 64:
        return -(code - _SIGNAL_EXIT_BASE)
    return code


def _kill(container: Any) -> None:
    try:
        container.kill()
    except _errors().APIError as exc:
        # 409: it exited between the timeout and the kill; nothing left to kill.
        if exc.status_code != 409:
            raise


def _remove(container: Any) -> None:
    """Remove the container and its workspace volume, also after errors."""
    try:
        container.remove(force=True, v=True)
    except _errors().NotFound:
        pass
    except Exception:
        # Not raised over the run's own outcome: the next sweep will find it by label.
        pass


def _errors() -> Any:
    """docker-py's exception module, imported when first needed (it has no type stubs)."""
    import docker.errors  # type: ignore[import-untyped]

    return docker.errors


def _owner_id() -> str:
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
        except _errors().NotFound:
            pass  # removed by its owner meanwhile
    # Workspace volumes a failed removal left behind; prune spares volumes still in use.
    client.volumes.prune(filters={"label": f"{LABEL}={LABEL_VALUE}"})
    return removed
