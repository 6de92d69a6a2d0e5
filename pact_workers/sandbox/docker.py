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
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any

from pact_workers.errors import SandboxError
from pact_workers.models.environment import EnvironmentSpec
from pact_workers.sandbox.archives import (
    WORKSPACE,
    collect_outputs,
    workspace_tar,
)
from pact_workers.sandbox.attach import ClosingStream, Tail, pump
from pact_workers.sandbox.base import (
    SandboxRequest,
    SandboxResult,
    cap_text,
    safe_relpath,
)
from pact_workers.sandbox.cancel import cancel_event, check_cancelled
from pact_workers.sandbox.containers import (
    LABEL,
    LABEL_OWNER,
    LABEL_VALUE,
    connect_from_env,
    container_options,
    exit_status,
    kill_container,
    oom_killed,
    owner_id,
    remove_container,
    sweep_containers,
)
from pact_workers.sandbox.images import (
    SandboxImageMissing,
    SandboxUnavailable,
    default_base_image,
    docker_errors,
    ensure_image,
)
from pact_workers.sandbox.toolcheck import checked_python, tool_check_command

__all__ = [
    "LABEL",
    "LABEL_OWNER",
    "LABEL_VALUE",
    "DockerSandbox",
    "SandboxImageMissing",
    "SandboxUnavailable",
    "connect_from_env",
    "sweep_containers",
]

log = logging.getLogger(__name__)

#: PATH of an image whose config names none (the Debian default).
DEFAULT_IMAGE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
#: How long output may still drain after a kill before the stream is abandoned.
KILL_GRACE_S = 10.0
#: Limits of the cheap container that checks the interpreter and required tools.
CHECK_TIMEOUT_S = 60.0
CHECK_MEMORY_MB = 128


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
            LABEL_OWNER: owner_id(),
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
        request = SandboxRequest(
            command=tool_check_command(spec),
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
        return checked_python(outcome.stdout_tail.decode("utf-8", "replace"), tag, path, spec)

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
        cancel = cancel_event()
        check_cancelled(f"the sandboxed command {argv[0]!r}")
        container: Any = None
        try:
            with docker_errors(f"creating a sandbox container of {tag}"):
                container = client.containers.create(
                    tag,
                    argv,
                    **container_options(
                        self._labels, env, request, engine_cpus=self._engine_cpus()
                    ),
                )
                if files:
                    container.put_archive(WORKSPACE, workspace_tar(files))
                stream = client.api.attach_socket(
                    container.id, params={"stdout": 1, "stderr": 1, "stream": 1}
                )
            out = Tail(request.max_output_bytes)
            err = Tail(request.max_output_bytes)
            with ClosingStream(stream) as raw, docker_errors("running a sandbox container"):
                container.start()
                started, began = time.monotonic(), time.time()
                try:
                    finished = pump(
                        raw, out, err, deadline=started + request.timeout_s, cancel=cancel
                    )
                    timed_out = not finished
                    if timed_out:
                        kill_container(container)
                        # Cancelled: the container goes now (finally), nothing is read.
                        check_cancelled(f"the sandboxed command {argv[0]!r}")
                        pump(raw, out, err, deadline=time.monotonic() + KILL_GRACE_S)
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
            with docker_errors("waiting for a sandbox container's memory verdict"):
                oomed = oom_killed(container, exit_code, timed_out=timed_out, started=began)
            if exit_code == 127 and b"[FATAL tini" in err.data():
                raise SandboxError(
                    f"cannot start {argv[0]!r}: {err.data().decode('utf-8', 'replace').strip()}"
                )
            with docker_errors("collecting outputs from a sandbox container"):
                collected = collect_outputs(client, container, collect, request.max_collect_bytes)
            return _Outcome(
                exit_code=exit_status(exit_code, timed_out=timed_out),
                stdout_tail=out.data(),
                stderr_tail=err.data(),
                duration_s=duration_s,
                timed_out=timed_out,
                oom_killed=oomed,
                files=collected,
            )
        finally:
            if container is not None:
                remove_container(container)

    def _engine_cpus(self) -> float:
        """The engine's CPU count: it refuses a CPU limit above it, so requests are capped."""
        if self._cpus is None:
            with docker_errors("asking the Docker engine for its CPU count"):
                self._cpus = float(self.client().info().get("NCPU") or 1)
        return self._cpus


@dataclass(frozen=True)
class _Outcome:
    exit_code: int
    stdout_tail: bytes
    stderr_tail: bytes
    duration_s: float
    timed_out: bool
    oom_killed: bool
    files: dict[str, bytes]
