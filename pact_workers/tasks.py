"""One Celery task per role, each thin: decode the message, run the attempt, publish.

A message is one attempt, or a pack of several short attempts of the role, which one
pool process runs one after the other, each as if it had come alone
(:mod:`pact_workers.fleet.packs`).

A task message carries a :class:`TaskMessage` as a JSON object: ids, the attempt
number (the fencing token) and artifact digests. The worker fetches inputs from
the Redis artifact store, runs the agent and the harness in its sandbox, stores
the outputs and publishes one :class:`ResultMessage` to the stream named in the
message. While it works it holds a lease the scheduler watches; a worker that
dies stops renewing it, and the scheduler dispatches a new attempt in seconds.

A worker that loses Redis mid-attempt fails nothing for good: what the attempt could
not fetch or store is a transient failure, and a result it cannot publish is left to
the scheduler, which sees the attempt's lease expire and dispatches it again.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from celery import Task
from celery.exceptions import SoftTimeLimitExceeded
from celery.signals import task_received, worker_ready, worker_shutdown
from pydantic import ValidationError
from redis.exceptions import RedisError, ResponseError

from pact_workers.agents.base import Agent
from pact_workers.app import QUEUES, TASK_NAMES, app, broker_url_from_env
from pact_workers.artifacts import ArtifactStore
from pact_workers.envvars import positive_seconds
from pact_workers.errors import InputError
from pact_workers.fleet import keys
from pact_workers.fleet.blobs import RedisBlobStore
from pact_workers.fleet.connection import redis_from_url
from pact_workers.fleet.heartbeats import heartbeat_worker
from pact_workers.fleet.leases import Leases
from pact_workers.fleet.packs import WaitingLeases, claim_all
from pact_workers.fleet.planning import answer_plan_call
from pact_workers.models.work import ErrorClass, ResultMessage, TaskMessage
from pact_workers.runner import execute_task
from pact_workers.sandbox.base import Sandbox
from pact_workers.sandbox.cancel import cancellable

log = logging.getLogger(__name__)


@dataclass
class WorkerRuntime:
    """What one worker process shares between its tasks (built on first use)."""

    broker_url: str
    worker_id: str
    store: ArtifactStore
    leases: Leases
    client: Any
    #: Builds a run's agent from its name and options (default :func:`build_agent`).
    make_agent: Callable[..., Agent] | None = None
    _agents: dict[tuple[str, str, tuple[tuple[str, str], ...]], Agent] = field(default_factory=dict)
    _sandboxes: dict[str, Sandbox] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def agent(self, name: str, options: dict[str, str], sandbox: str) -> Agent:
        """The run's agent; a command backend runs in the run's ``sandbox``."""
        key = (name, sandbox, tuple(sorted(options.items())))
        box = self.sandbox(sandbox)
        with self._lock:
            if key not in self._agents:
                make = self.make_agent or build_agent
                self._agents[key] = make(name, options, sandbox=box)
            return self._agents[key]

    def sandbox(self, name: str) -> Sandbox:
        with self._lock:
            if name not in self._sandboxes:
                self._sandboxes[name] = build_sandbox(name)
            return self._sandboxes[name]


def build_agent(name: str, options: dict[str, str], *, sandbox: Sandbox | None = None) -> Agent:
    """The agent a task asks for. Options never carry secrets; keys come from the env."""
    from pact_workers.agents.factory import build_agent as build

    try:
        return build(name, options, sandbox=sandbox)
    except InputError as exc:
        raise ValueError(f"this worker cannot build agent {name!r}: {exc}") from exc


def build_sandbox(name: str) -> Sandbox:
    if name == "local":
        from pact_workers.sandbox.local import LocalSandbox

        return LocalSandbox()
    if name == "docker":
        from pact_workers.sandbox.docker import DockerSandbox

        return DockerSandbox.from_env()
    raise ValueError(f"this worker has no sandbox {name!r}")


@cache
def runtime() -> WorkerRuntime:
    url = broker_url_from_env()
    client = redis_from_url(url)
    worker_id = os.environ.get("PACT_WORKER_ID") or f"{socket.gethostname()}:{os.getpid()}"
    return WorkerRuntime(
        broker_url=url,
        worker_id=worker_id,
        store=ArtifactStore(RedisBlobStore(client)),
        leases=Leases(client, ttl_s=float(os.environ.get("PACT_LEASE_TTL_S", "10"))),
        client=client,
    )


def run_attempt(message: dict[str, Any] | TaskMessage, rt: WorkerRuntime | None = None) -> str:
    """Execute one attempt and publish its result; returns what happened, for Flower.

    ``message``: the wire's dict, or a TaskMessage already validated (a pack's member).
    ``rt``: the worker's runtime (default: the one built from the environment).
    """
    if isinstance(message, TaskMessage):
        task = message
    else:
        try:
            task = TaskMessage.model_validate(message)
        except ValidationError as exc:
            # Nothing to reply to safely: the message itself is malformed. Acknowledge
            # and log.
            log.error("rejected a malformed task message: %s", str(exc).splitlines()[0])
            return "rejected: malformed message"
    rt = rt or runtime()
    if not task.reply_to:
        log.error("task %s has no reply_to stream; dropped", task.idempotency_key)
        return "rejected: no reply_to"
    try:
        hold = rt.leases.start(task, rt.worker_id)
    except RedisError as exc:
        # Nothing ran: the attempt's lease expires (or its role's timeout passes) and
        # the scheduler dispatches it again.
        log.warning("attempt %s not started: Redis is unreachable (%s)", task.idempotency_key, exc)
        return "not started: Redis unreachable"
    if hold is None:
        # A newer attempt was dispatched (this one's lease expired): do not run stale work.
        return "superseded"
    with hold, cancellable(hold.cancelled):
        try:
            result = execute_task(
                task,
                agent=rt.agent(task.agent, dict(task.agent_options), task.sandbox),
                sandbox=rt.sandbox(task.sandbox),
                store=rt.store,
                # The lease says when the harness verifies (the scheduler shows it).
                on_progress=hold.stage,
            )
        except SoftTimeLimitExceeded:
            result = _error(task, "SoftTimeLimitExceeded: the attempt ran past its time limit")
        except ValueError as exc:  # an agent or sandbox this worker cannot build
            result = _error(task, str(exc), ErrorClass.SYSTEMIC)
        except RedisError as exc:  # the artifact store went away where nothing caught it
            result = _error(task, f"{type(exc).__name__}: {exc}")
        if hold.cancelled.is_set():
            # Superseded while it ran (its sandbox was stopped): the scheduler fenced it
            # and reads no result; the lease goes when the hold exits.
            log.info("attempt %s was cancelled while it ran", task.idempotency_key)
            return "cancelled"
        # The done marker, the result and the lease's deletion happen at once: a
        # scheduler never sees the lease gone before the result is in the stream, and
        # no lease with no marker means the worker died.
        try:
            published = rt.leases.finish(task, task.reply_to, result.model_dump_json().encode())
        except RedisError as exc:
            why = "Redis refused it" if isinstance(exc, ResponseError) else "Redis unreachable"
            log.warning(
                "could not publish the result of %s: %s (%s); the scheduler dispatches the "
                "attempt again when its lease expires",
                task.idempotency_key,
                why,
                exc,
            )
            return f"unpublished: {why}"
        if not published:
            return "duplicate"
        hold.release()
    return result.outcome


def run_pack(messages: list[Any], rt: WorkerRuntime | None = None) -> str:
    """Run the attempts of a pack one after the other (see :func:`run_attempt`); their
    claimed leases are kept alive while they wait. Returns what happened to each."""
    rt = rt or runtime()
    tasks = _valid(messages)
    outcomes = []
    with WaitingLeases(rt.leases, tasks.values(), rt.worker_id) as waiting:
        for i, message in enumerate(messages):
            task = tasks.get(i)
            if task is not None:
                waiting.started(task)
            # A malformed member goes as it came: run_attempt rejects it on its own.
            outcomes.append(run_attempt(message if task is None else task, rt))
    return f"pack of {len(messages)}: " + ", ".join(outcomes)


def _valid(messages: list[Any]) -> dict[int, TaskMessage]:
    """The well-formed attempts of a pack, by their place in it (run_attempt rejects
    the others, each on its own)."""
    tasks = {}
    for i, message in enumerate(messages):
        try:
            tasks[i] = TaskMessage.model_validate(message)
        except ValidationError:
            continue
    return tasks


def _error(
    task: TaskMessage, message: str, cls: ErrorClass = ErrorClass.TRANSIENT
) -> ResultMessage:
    return ResultMessage(
        run_id=task.run_id,
        component_id=task.component_id,
        phase=task.phase,
        attempt=task.attempt,
        outcome="error",
        error_class=cls,
        error_type=message.split(":", 1)[0],
        error=message,
    )


@task_received.connect  # type: ignore[untyped-decorator]
def claim_on_receipt(request: Any = None, **_: Any) -> None:
    """Take the lease of an attempt (of each attempt of a pack) as soon as this worker
    takes its message.

    Runs in the worker's main process. Until now the attempt's lease said
    ``queued``; from here a worker that dies before or while running it stops
    renewing it, and the scheduler notices within one lease TTL.
    """
    if request is None or not str(getattr(request, "name", "")).startswith("pact."):
        return
    try:
        message = request.args[0]
        rt = runtime()
        if isinstance(message, list):
            claim_all(rt.leases, _valid(message).values(), rt.worker_id)
        else:
            rt.leases.claim(TaskMessage.model_validate(message), rt.worker_id)
    except Exception:  # a claim is an optimisation of failure detection, never fatal
        log.warning("could not claim the lease of a received task", exc_info=True)


def _register(name: str) -> Callable[..., str]:
    def role_task(self: Task, message: dict[str, Any] | list[Any]) -> str:
        if name in PLANNING_TASKS and isinstance(message, dict):
            # The planning roles answer a call of ``pact plan``, not a work item.
            return answer_plan_call(message, runtime().client)
        if isinstance(message, list):
            return run_pack(message)
        return run_attempt(message)

    role_task.__name__ = name.replace(".", "_")
    return app.task(name=name, bind=True)(role_task)  # type: ignore[no-any-return]


#: The planning roles' tasks (``pact plan --executor celery``).
PLANNING_TASKS = frozenset({TASK_NAMES["interviewer"], TASK_NAMES["decomposer"]})
#: The tasks, by role (``pact.contract_author``, ...).
ROLE_TASKS = {role: _register(name) for role, name in TASK_NAMES.items()}


# -- worker heartbeat -----------------------------------------------------------------------

#: Seconds between two heartbeats of a worker process (``PACT_WORKER_HEARTBEAT_S``); the
#: key lives three of them, so a killed worker drops out of ``pact workers`` that fast.
HEARTBEAT_S = 5.0


def heartbeat_interval_s(environ: Mapping[str, str] = os.environ) -> float:
    """Seconds between two heartbeats: ``PACT_WORKER_HEARTBEAT_S``, else
    :data:`HEARTBEAT_S`.

    Raises:
        InputError: the variable is not a finite number of seconds greater than 0.
    """
    return positive_seconds(
        environ,
        "PACT_WORKER_HEARTBEAT_S",
        HEARTBEAT_S,
        what="the time between two heartbeats of a worker",
        unset=f"unset: {HEARTBEAT_S:g}",
    )


class WorkerHeartbeat:
    """Keeps ``pact:worker:<id>`` alive while this Celery worker runs (its main process)."""

    def __init__(self, worker_id: str, info: dict[str, Any], interval_s: float) -> None:
        self.worker_id = worker_id
        self.info = info
        self.interval_s = interval_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, name="pact-heartbeat", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Stop beating and remove the key: a worker that stops cleanly is gone at once."""
        self._stop.set()
        self._thread.join(self.interval_s + 5)
        try:
            runtime().client.delete(keys.worker(self.worker_id))
        except Exception:  # the key expires on its own
            log.warning("could not remove the heartbeat of %s", self.worker_id)

    def _beat(self) -> None:
        while True:
            try:
                heartbeat_worker(
                    runtime().client, self.worker_id, self.info, ttl_s=3 * self.interval_s
                )
            except Exception:  # Redis away: the next beat tries again
                log.warning("worker heartbeat failed", exc_info=True)
            if self._stop.wait(self.interval_s):
                return


_heartbeat: WorkerHeartbeat | None = None


@worker_ready.connect  # type: ignore[untyped-decorator]
def start_heartbeat(sender: Any = None, **_: Any) -> None:
    """Announce this worker: its roles (the queues it consumes), host, pid, concurrency."""
    global _heartbeat
    if sender is None or _heartbeat is not None:
        return
    try:
        consumed = set(sender.app.amqp.queues.consume_from)  # what -Q selected
        roles = sorted(role for role, queue in QUEUES.items() if queue in consumed)
        info = {
            "roles": roles,
            "hostname": socket.gethostname(),
            "pid": os.getpid(),
            "concurrency": getattr(sender.controller, "concurrency", None)
            if hasattr(sender, "controller")
            else None,
            "started_at": time.time(),
        }
        # Checked by `pact worker` before the worker started (worker_argv).
        _heartbeat = WorkerHeartbeat(str(sender.hostname), info, heartbeat_interval_s())
        _heartbeat.start()
    except Exception:  # being listed is for operators; never stop a worker over it
        log.warning("could not start the worker heartbeat", exc_info=True)


@worker_shutdown.connect  # type: ignore[untyped-decorator]
def stop_heartbeat(**_: Any) -> None:
    global _heartbeat
    if _heartbeat is not None:
        _heartbeat.stop()
        _heartbeat = None
