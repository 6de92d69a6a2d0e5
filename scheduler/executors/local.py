"""The local executor: an in-process thread pool (the embedded default).

Threads suffice: the work of an attempt is the agent call and a sandboxed
subprocess, both of which release the GIL while they wait.
"""

from __future__ import annotations

import queue
import threading
from concurrent.futures import Future, ThreadPoolExecutor

from pact_workers.agents.base import Agent
from pact_workers.artifacts import ArtifactStore
from pact_workers.models.work import ErrorClass, Phase, ResultMessage, TaskMessage
from pact_workers.runner import execute_task
from pact_workers.sandbox.base import Sandbox
from pact_workers.sandbox.cancel import cancellable
from scheduler.executors.base import LostAttempt


class LocalExecutor:
    name = "local"

    def __init__(
        self, *, workers: int, agent: Agent, sandbox: Sandbox, store: ArtifactStore
    ) -> None:
        if workers < 1:
            raise ValueError("workers must be at least 1")
        self.capacity = workers
        self._agent, self._sandbox, self._store = agent, sandbox, store
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="pact-worker")
        self._results: queue.Queue[ResultMessage] = queue.Queue()
        self._activity: queue.Queue[tuple[str, Phase, int]] = queue.Queue()
        #: (attempt, stage) as attempts move on: ``agent`` (running), ``verify``.
        self._stages: queue.Queue[tuple[tuple[str, Phase, int], str]] = queue.Queue()
        #: The cancel event of each attempt not finished yet (set by :meth:`revoke`).
        self._cancels: dict[tuple[str, Phase, int], threading.Event] = {}

    def _report(self, lease: tuple[str, Phase, int], stage: str) -> None:
        self._activity.put(lease)
        self._stages.put((lease, stage))

    def stages(self) -> list[tuple[tuple[str, Phase, int], str]]:
        """(attempt, stage) as attempts reported them since last asked, in order."""
        out: list[tuple[tuple[str, Phase, int], str]] = []
        while True:
            try:
                out.append(self._stages.get_nowait())
            except queue.Empty:
                return out

    def submit(self, task: TaskMessage) -> None:
        lease = (task.component_id, task.phase, task.attempt)
        cancel = self._cancels[lease] = threading.Event()
        future = self._pool.submit(self._execute, task, lease, cancel)
        future.add_done_callback(lambda f: self._done(task, lease, f))

    def _execute(
        self, task: TaskMessage, lease: tuple[str, Phase, int], cancel: threading.Event
    ) -> ResultMessage:
        # Runs in the pool's thread: the cancel event must be bound there.
        with cancellable(cancel):
            return execute_task(
                task,
                agent=self._agent,
                sandbox=self._sandbox,
                store=self._store,
                on_progress=lambda stage: self._report(lease, stage),
            )

    def _done(
        self, task: TaskMessage, lease: tuple[str, Phase, int], future: Future[ResultMessage]
    ) -> None:
        self._cancels.pop(lease, None)
        self._results.put(_result_of(task, future))

    def revoke(self, attempts: list[tuple[str, Phase, int]]) -> None:
        """Stop fenced attempts (pact cancel): a running sandbox is killed, a wait ends;
        what they still report is dropped by the run loop, which fenced them."""
        for lease in attempts:
            event = self._cancels.get(lease)
            if event is not None:
                event.set()

    def poll(self, timeout_s: float) -> list[ResultMessage]:
        out: list[ResultMessage] = []
        try:
            out.append(self._results.get(timeout=max(timeout_s, 0.0)))
        except queue.Empty:
            return out
        while True:
            try:
                out.append(self._results.get_nowait())
            except queue.Empty:
                return out

    def activity(self) -> list[tuple[str, Phase, int]]:
        out = []
        while True:
            try:
                out.append(self._activity.get_nowait())
            except queue.Empty:
                return out

    survives_restart = False

    def ack(self, result: ResultMessage) -> None:
        """Nothing to do: results live only in this process's queue."""

    def lost(self) -> list[LostAttempt]:
        return []  # a thread cannot vanish without its future reporting

    def adopt(self, attempts: list[tuple[str, Phase, int]]) -> None:
        raise RuntimeError("in-process attempts do not survive a restart")

    def close(self, *, wait: bool = True) -> None:
        """Stop taking work; ``wait=False`` returns at once, leaving attempts in flight
        to finish on their own (their results are never read: resume redoes them)."""
        self._pool.shutdown(wait=wait, cancel_futures=True)


def _result_of(task: TaskMessage, future: Future[ResultMessage]) -> ResultMessage:
    exc = future.exception()
    if exc is None:
        return future.result()
    # execute_task never raises; if it does anyway, the attempt must still report.
    return ResultMessage(
        run_id=task.run_id,
        component_id=task.component_id,
        phase=task.phase,
        attempt=task.attempt,
        outcome="error",
        error_class=ErrorClass.PERMANENT,
        error_type=type(exc).__name__,
        error=str(exc),
    )
