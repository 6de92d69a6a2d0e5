"""The simulated executor: attempts that take virtual time and always succeed.

For benchmarks and scheduling tests. Nothing runs: each attempt occupies one of
``workers`` slots for ``latency(component_id, phase)`` virtual seconds, then
reports a real ``ok`` result whose output bundle is in the artifact store, so
the real :class:`~scheduler.run.RunController` (audit log, state fold, inputs,
promotion) runs unchanged on top of it. Makespans are exact and reproducible:
they are virtual seconds, not wall-clock measurements.
"""

from __future__ import annotations

import hashlib
import heapq
import json
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from graphlib import TopologicalSorter

from pact_workers.artifacts import ArtifactStore, Bundle
from pact_workers.models.testing import TestResults
from pact_workers.models.work import Phase, ResultMessage, TaskMessage
from scheduler.executors.base import LostAttempt
from scheduler.wavefront import Key, WorkGraph

__all__ = [
    "MEAN_LATENCY_S",
    "Latency",
    "SimulatedExecutor",
    "TaskSpan",
    "VirtualClock",
    "critical_path_s",
    "lower_bound_s",
    "simulated_output",
    "stigmergy_like_latency",
    "total_work_s",
]

#: Seconds one attempt of ``phase`` takes for ``component_id``.
Latency = Callable[[str, Phase], float]

#: Mean virtual seconds per phase. Contracts: the stigmergy run's history
#: timestamps show ~13 minutes per contract; the others are estimates.
MEAN_LATENCY_S: dict[Phase, float] = {
    Phase.CONTRACT: 780.0,
    Phase.TEST: 480.0,
    Phase.IMPLEMENT: 900.0,
    Phase.INTEGRATE: 600.0,
}

#: Each latency is its phase mean times a factor uniform in this range.
LATENCY_SPREAD = (0.7, 1.3)


class VirtualClock:
    """Time that only moves when told to; callable, so it can be passed as ``clock=``."""

    def __init__(self, start_s: float = 0.0) -> None:
        self._now_s = start_s

    def now(self) -> float:
        """The current virtual time in seconds."""
        return self._now_s

    def __call__(self) -> float:
        return self._now_s

    def advance_to(self, t_s: float) -> None:
        """Move the clock forward to ``t_s``.

        Raises:
            ValueError: ``t_s`` is earlier than now (virtual time never goes back).
        """
        if t_s < self._now_s:
            raise ValueError(f"virtual time cannot go back from {self._now_s} to {t_s}")
        self._now_s = t_s

    def sleep(self, seconds: float) -> None:
        """Advance the clock by ``seconds`` at once (the ``sleep=`` of RunController)."""
        self.advance_to(self._now_s + max(0.0, seconds))


@dataclass(frozen=True)
class TaskSpan:
    """When one attempt held a worker slot, in virtual seconds."""

    component_id: str
    phase: Phase
    attempt: int
    submitted_s: float
    start_s: float
    end_s: float


class SimulatedExecutor:
    """An :class:`~scheduler.executors.base.Executor` on a :class:`VirtualClock`.

    Like a pool of ``workers`` threads: a task submitted while every slot is
    busy waits in FIFO order (RunController never does that; a scheduler that
    over-dispatched would show up as ``start_s > submitted_s`` in :attr:`spans`).

    Args:
        workers: Slots, reported as :attr:`capacity`.
        store: Where output bundles are written (the run's store).
        clock: The virtual clock; :meth:`poll` advances it.
        latency: Virtual seconds per (component id, phase).
        dependencies: Internal dependencies each component's contract declares.
        heartbeats: Report every running attempt as alive from :meth:`activity`.
            On by default because the run loop's stall lease (300 s by default)
            is shorter than most simulated attempts: a silent attempt would be
            declared stalled and retried, which is not what is being measured.
            Off reproduces a worker that never reports progress.
        verified: Report the contract tests of every implementation and composition
            as run and passed (one test), as the harness does after a verification:
            promotions then write ``test_results.json`` and capture baselines, and
            ``pact status`` checks them for drift, as after a real run. Off: results
            carry no test results (what nothing-but-scheduling measurements want).
    """

    name = "simulated"

    def __init__(
        self,
        *,
        workers: int,
        store: ArtifactStore,
        clock: VirtualClock,
        latency: Latency,
        dependencies: Mapping[str, Sequence[str]] | None = None,
        heartbeats: bool = True,
        verified: bool = False,
    ) -> None:
        if workers < 1:
            raise ValueError("workers must be at least 1")
        self.capacity = workers
        self.store = store
        self.clock = clock
        self.latency = latency
        self.dependencies = {cid: list(deps) for cid, deps in (dependencies or {}).items()}
        self.heartbeats = heartbeats
        self.verified = verified
        #: Every attempt that has started, in start order (for idle-time analysis).
        self.spans: list[TaskSpan] = []
        self._queued: deque[tuple[TaskMessage, float]] = deque()
        # (end_s, sequence, task, span): the sequence keeps ties in submission order.
        self._running: list[tuple[float, int, TaskMessage, TaskSpan]] = []
        self._seq = 0

    def submit(self, task: TaskMessage) -> None:
        """Start ``task`` now if a slot is free, else queue it for the next free slot."""
        self._queued.append((task, self.clock.now()))
        self._start_queued()

    def poll(self, timeout_s: float) -> list[ResultMessage]:
        """Advance the clock to the next completion and return every result due then.

        ``timeout_s`` is not honoured: nothing the simulation models can happen
        before the next completion, and stepping in ``poll_s`` increments would
        cost one run-loop iteration per half virtual second. (A retry backoff
        timer is the exception: a retry due earlier is dispatched only at the
        next completion. Simulated attempts never fail, so none is ever due.)

        Returns:
            The results completing at that instant, in submission order; ``[]``
            when nothing is running.
        """
        if not self._running:
            return []
        end_s = self._running[0][0]
        self.clock.advance_to(max(end_s, self.clock.now()))
        results = []
        while self._running and self._running[0][0] == end_s:
            _, _, task, span = heapq.heappop(self._running)
            results.append(self._result(task, span))
        self._start_queued()
        return results

    def activity(self) -> list[tuple[str, Phase, int]]:
        """The lease of every running attempt when heartbeats are on, else nothing."""
        if not self.heartbeats:
            return []
        return [(t.component_id, t.phase, t.attempt) for _, _, t, _ in self._running]

    survives_restart = False

    def ack(self, result: ResultMessage) -> None:
        """Nothing to acknowledge: results are handed over once."""

    def lost(self) -> list[LostAttempt]:
        return []

    def adopt(self, attempts: list[tuple[str, Phase, int]]) -> None:
        raise RuntimeError("simulated attempts do not survive a restart")

    def close(self) -> None:
        """Drop everything still queued or running; no result will be reported."""
        self._queued.clear()
        self._running.clear()

    @property
    def busy(self) -> int:
        """Slots in use right now."""
        return len(self._running)

    def _start_queued(self) -> None:
        now_s = self.clock.now()
        while self._queued and len(self._running) < self.capacity:
            task, submitted_s = self._queued.popleft()
            duration_s = float(self.latency(task.component_id, task.phase))
            if duration_s < 0:
                raise ValueError(
                    f"latency of {task.component_id}/{task.phase.value} is negative: {duration_s}"
                )
            span = TaskSpan(
                component_id=task.component_id,
                phase=task.phase,
                attempt=task.attempt,
                submitted_s=submitted_s,
                start_s=now_s,
                end_s=now_s + duration_s,
            )
            self.spans.append(span)
            self._seq += 1
            heapq.heappush(self._running, (span.end_s, self._seq, task, span))

    def _result(self, task: TaskMessage, span: TaskSpan) -> ResultMessage:
        files = simulated_output(task, self.store, self.dependencies.get(task.component_id, []))
        return ResultMessage(
            run_id=task.run_id,
            component_id=task.component_id,
            phase=task.phase,
            attempt=task.attempt,
            outcome="ok",
            output=self.store.put_bundle(files),
            duration_s=span.end_s - span.start_s,
            test_results=_PASSED if self.verified and task.phase in _VERIFIED else None,
        )


#: What a verified simulated attempt reports (see ``SimulatedExecutor``'s ``verified``).
_PASSED = TestResults(total=1, passed=1)
_VERIFIED = (Phase.IMPLEMENT, Phase.INTEGRATE)


def simulated_output(task: TaskMessage, store: ArtifactStore, dependencies: list[str]) -> Bundle:
    """The smallest output the harness and the run loop accept for ``task``'s phase.

    The contract takes its name and description from the component spec the
    run loop put in the task's inputs, so it says what the tree says.
    """
    cid = task.component_id
    if task.phase is Phase.CONTRACT:
        spec = _spec(task, store)
        contract = {
            "component_id": cid,
            "name": str(spec.get("name") or cid),
            "description": str(spec.get("description") or f"simulated contract of {cid}"),
            "dependencies": list(dependencies),
        }
        return {"interface.json": json.dumps(contract, indent=2, sort_keys=True).encode()}
    if task.phase is Phase.TEST:
        test = f"def test_{cid}_is_simulated() -> None:\n    assert True\n"
        return {"tests/contract_test.py": test.encode()}
    return {f"src/{cid}.py": f'"""Simulated {task.phase.value} of {cid}."""\n'.encode()}


def _spec(task: TaskMessage, store: ArtifactStore) -> dict[str, object]:
    digest = task.inputs.get("spec")
    if digest is None:
        return {}
    raw = store.get_bundle(digest).get("component.json")
    spec = json.loads(raw) if raw is not None else {}
    return spec if isinstance(spec, dict) else {}


def stigmergy_like_latency(seed: int) -> Latency:
    """Latencies like the stigmergy run's: each phase's mean times a factor in [0.7, 1.3].

    The factor is a hash of (seed, component, phase), not a random stream, so a
    latency does not depend on the order in which a scheduler asks for it.
    """
    low, high = LATENCY_SPREAD

    def latency(component_id: str, phase: Phase) -> float:
        digest = hashlib.sha256(f"{seed}\0{component_id}\0{phase.value}".encode()).digest()
        unit = int.from_bytes(digest[:8], "big") / 2**64
        return MEAN_LATENCY_S[phase] * (low + (high - low) * unit)

    return latency


def critical_path_s(graph: WorkGraph, latency: Latency) -> float:
    """The longest chain of work items, weighted by their latencies."""
    order = TopologicalSorter({k: graph.prerequisites(*k) for k in graph.keys}).static_order()
    finish_s: dict[Key, float] = {}
    for key in order:
        start_s = max((finish_s[p] for p in graph.prerequisites(*key)), default=0.0)
        finish_s[key] = start_s + latency(*key)
    return max(finish_s.values(), default=0.0)


def total_work_s(graph: WorkGraph, latency: Latency) -> float:
    """The sum of every work item's latency (the makespan on one worker)."""
    return sum(latency(*key) for key in graph.keys)


def lower_bound_s(graph: WorkGraph, latency: Latency, workers: int) -> float:
    """No schedule on ``workers`` slots can finish sooner than this.

    The larger of the critical path and the total work spread evenly over the
    workers (each alone is a valid bound; neither accounts for the other).
    """
    if workers < 1:
        raise ValueError("workers must be at least 1")
    return max(critical_path_s(graph, latency), total_work_s(graph, latency) / workers)
