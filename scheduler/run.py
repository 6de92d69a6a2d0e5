"""The run loop: fold the log, dispatch the ready set, apply results, repeat.

Every decision is written to the audit log (flushed and fsynced) before it is
acted on, and the state is only ever changed by folding that event. After a
crash, opening the run again replays the log and carries on from there.
"""

from __future__ import annotations

import logging
import random
import secrets
import time
from collections.abc import Callable
from typing import Any

from pact_workers.artifacts import ArtifactStore
from pact_workers.errors import PactError, RunDirError, VerificationError
from pact_workers.models.tree import DecompositionTree, find_cycle, implementation_edges
from pact_workers.models.work import (
    IN_FLIGHT,
    ErrorClass,
    ItemStatus,
    Phase,
    ResultMessage,
    TaskMessage,
)
from pact_workers.verify import verify_contract
from scheduler.audit import AuditLog, read_events
from scheduler.events import (
    ArtifactsPromoted,
    Event,
    ItemDispatched,
    ItemFailed,
    ItemsPoisoned,
    ItemSucceeded,
    ResultDropped,
    RunCompleted,
    RunFailed,
    RunPaused,
    RunStarted,
)
from scheduler.executors.base import Executor
from scheduler.inputs import build_inputs
from scheduler.policy import decide
from scheduler.project import ProjectDir
from scheduler.settings import Settings
from scheduler.state import INTERRUPTED, RunState, RunStatus, apply, fold, item_key
from scheduler.wavefront import WavefrontScheduler

log = logging.getLogger(__name__)

Listener = Callable[[Event, RunState], None]


def new_run_id() -> str:
    return secrets.token_hex(6)


def start_run(
    project: ProjectDir,
    tree: DecompositionTree,
    *,
    tree_bytes: bytes,
    settings: Settings,
    agent: str = "",
    sandbox: str = "",
    run_id: str | None = None,
) -> str:
    """Create the run directory and log ``run_started``; the tree is already validated."""
    if project.has_run():
        raise RunDirError(
            f"{project.root}: already holds a run; use `pact status` or `pact resume`, "
            "or choose another --project directory"
        )
    run_id = run_id or new_run_id()
    project.tree_path.parent.mkdir(parents=True, exist_ok=True)
    project.tree_path.write_bytes(tree_bytes)
    with AuditLog(project.audit_path) as audit:
        event = audit.append(
            RunStarted(
                run_id=run_id,
                tree=tree.model_dump(mode="json"),
                settings=settings.model_dump(mode="json"),
                agent=agent,
                sandbox=sandbox,
            )
        )
    project.write_state(fold([event]))
    return run_id


def load_state(project: ProjectDir) -> tuple[RunState, list[str]]:
    """Rebuild the state from the audit log (never from state.json)."""
    project.require_run()
    events, warnings = read_events(project.audit_path)
    return fold(events), warnings


class RunController:
    """Drives one run to a terminal or paused state with one executor."""

    def __init__(
        self,
        project: ProjectDir,
        *,
        executor: Executor,
        store: ArtifactStore,
        settings: Settings,
        clock: Callable[[], float] = time.time,
        listener: Listener | None = None,
        rng: random.Random | None = None,
        poll_s: float = 0.5,
    ) -> None:
        self.project = project
        self.executor = executor
        self.store = store
        self.settings = settings
        self.clock = clock
        self.listener = listener
        self.rng = rng or random.Random()
        self.poll_s = poll_s
        self.audit = AuditLog(project.audit_path)
        self.state = RunState()
        self.scheduler: WavefrontScheduler | None = None

    # -- lifecycle --------------------------------------------------------

    def drive(self) -> RunState:
        """Run until the run completes, fails or pauses; returns the final state."""
        self.audit.open()
        try:
            self._recover()
            while self.state.status is RunStatus.ACTIVE:
                self._dispatch_ready()
                if not self.state.in_flight():
                    if self._wait_for_retries():
                        continue
                    self._finish()
                    break
                for result in self.executor.poll(self._poll_timeout()):
                    self._handle(result)
                self.project.write_state(self.state)
            self.project.write_state(self.state)
            return self.state
        finally:
            self.audit.close()

    def _recover(self) -> None:
        events, warnings = read_events(self.project.audit_path)
        for warning in warnings:
            log.warning(warning)
        self.state = fold(events)
        if self.state.tree is None:
            raise RunDirError(f"{self.project.audit_path}: the log has no run_started event")
        self.scheduler = WavefrontScheduler(
            self.state.tree,
            dependencies=self.state.dependencies,
            max_concurrent_agents=min(
                self.settings.max_concurrent_agents or self.executor.capacity,
                self.executor.capacity,
            ),
            mode=self.settings.scheduling,
        )
        self.project.sweep_staging()
        # Attempts that were in flight when the previous scheduler stopped can
        # no longer report to us: dispatch them again under a new attempt number.
        now = self.clock()
        for item in self.state.in_flight():
            self._log(
                ItemFailed(
                    component_id=item.component_id,
                    phase=item.phase,
                    attempt=item.attempt,
                    error_class=ErrorClass.TRANSIENT,
                    error_type=INTERRUPTED,
                    error="the scheduler stopped while this attempt was in flight",
                    decision="retry",
                    retry_at=now,
                )
            )
        # Verified outputs whose promotion a crash cut short are promoted now.
        for item in list(self.state.items.values()):
            if item.status is ItemStatus.DONE and not item.promoted:
                self._promote(item.component_id, item.phase)

    def _log(self, event: Event) -> Event:
        stored = self.audit.append(event)
        apply(self.state, stored)
        if self.listener is not None:
            self.listener(stored, self.state)
        return stored

    # -- dispatch ---------------------------------------------------------

    def _dispatch_ready(self) -> None:
        assert self.scheduler is not None
        for cid, phase in self.scheduler.ready_for_state(self.state, now=self.clock()):
            self._dispatch(cid, phase)

    def _dispatch(self, component_id: str, phase: Phase) -> None:
        item = self.state.item(component_id, phase)
        attempt = item.attempt + 1
        try:
            inputs, verify_inputs = build_inputs(self.state, self.store, component_id, phase)
        except (VerificationError, PactError) as exc:
            self._fail_without_attempt(component_id, phase, attempt, str(exc))
            return
        timeout_s = self.settings.verify_timeout_s
        feedback = [f for f in item.failures if f.summary]
        event = self._log(
            ItemDispatched(
                component_id=component_id,
                phase=phase,
                attempt=attempt,
                role=item_role(phase),
                inputs=inputs,
                verify_inputs=verify_inputs,
                feedback=feedback,
                timeout_s=timeout_s,
            )
        )
        assert isinstance(event, ItemDispatched)
        self.executor.submit(
            TaskMessage(
                run_id=self.state.run_id,
                component_id=component_id,
                phase=phase,
                attempt=attempt,
                inputs=inputs,
                verify_inputs=verify_inputs,
                feedback=feedback,
                environment=self.settings.environment,
                timeout_s=timeout_s,
            )
        )

    def _fail_without_attempt(
        self, component_id: str, phase: Phase, attempt: int, error: str
    ) -> None:
        self._log(
            ItemFailed(
                component_id=component_id,
                phase=phase,
                attempt=attempt,
                error_class=ErrorClass.PERMANENT,
                error_type="inputs",
                error=error,
                decision="give_up",
            )
        )
        self._poison(component_id, phase)

    # -- results ----------------------------------------------------------

    def _handle(self, result: ResultMessage) -> None:
        key = item_key(result.component_id, result.phase)
        item = self.state.items.get(key)
        if result.run_id != self.state.run_id or item is None:
            self._log(_dropped(result, "result for another run or an unknown item"))
            return
        if item.status not in IN_FLIGHT or item.attempt != result.attempt:
            self._log(
                _dropped(
                    result,
                    f"attempt {result.attempt} is not the current attempt "
                    f"({item.attempt}, {item.status.value})",
                )
            )
            return
        if result.outcome == "ok" and result.output is not None:
            self._succeed(result)
        else:
            self._fail(result)

    def _succeed(self, result: ResultMessage) -> None:
        discovered: list[str] = []
        external: list[str] = []
        if result.phase is Phase.CONTRACT:
            try:
                discovered, external = self._contract_dependencies(result)
            except VerificationError as exc:
                self._fail(
                    result.model_copy(
                        update={
                            "outcome": "error",
                            "error_class": ErrorClass.PERMANENT,
                            "error_type": "dependency_cycle",
                            "error": str(exc),
                        }
                    )
                )
                return
        files = sorted(self.store.get_manifest(result.output or ""))
        self._log(
            ItemSucceeded(
                component_id=result.component_id,
                phase=result.phase,
                attempt=result.attempt,
                output=result.output or "",
                files=files,
                test_results=result.test_results,
                usage=result.usage,
                duration_s=result.duration_s,
                discovered_dependencies=discovered,
                external_dependencies=external,
            )
        )
        self._promote(result.component_id, result.phase)

    def _contract_dependencies(self, result: ResultMessage) -> tuple[list[str], list[str]]:
        """Split a new contract's dependencies into internal and external; reject cycles."""
        assert self.state.tree is not None
        contract = verify_contract(self.store.get_bundle(result.output or ""), result.component_id)
        nodes = self.state.tree.nodes
        cid = result.component_id
        known = self.state.dependencies.get(cid, [])
        internal = [d for d in contract.dependencies if d in nodes and d != cid]
        external = [d for d in contract.dependencies if d not in nodes]
        external += list(contract.external_dependencies)
        new = [d for d in dict.fromkeys(internal) if d not in known]
        if new:
            deps = {c: list(v) for c, v in self.state.dependencies.items()}
            deps[cid] = [*known, *new]
            tree = self.state.tree.model_copy(
                update={
                    "nodes": {
                        c: n.model_copy(update={"dependencies": deps.get(c, [])})
                        for c, n in nodes.items()
                    }
                }
            )
            cycle = find_cycle(implementation_edges(tree))
            if cycle:
                raise VerificationError(
                    f"component {cid!r}: its contract's dependencies {new} create a cycle: "
                    + " -> ".join(cycle)
                )
        return new, list(dict.fromkeys(external))

    def _fail(self, result: ResultMessage) -> None:
        item = self.state.item(result.component_id, result.phase)
        decision = decide(result, item, self.settings, now=self.clock(), rng=self.rng)
        self._log(
            ItemFailed(
                component_id=result.component_id,
                phase=result.phase,
                attempt=result.attempt,
                error_class=result.error_class or ErrorClass.PERMANENT,
                error_type=result.error_type,
                error=result.error,
                test_results=result.test_results,
                usage=result.usage,
                duration_s=result.duration_s,
                decision=decision.action,
                retry_at=decision.retry_at,
            )
        )
        if decision.action == "give_up":
            self._poison(result.component_id, result.phase)
        elif decision.action == "pause":
            self._log(
                RunPaused(
                    reason=f"{result.component_id}/{result.phase.value}: {decision.reason}",
                    recommendation="fix the worker environment, then `pact resume`",
                )
            )

    def _poison(self, component_id: str, phase: Phase) -> None:
        assert self.scheduler is not None
        downstream = [
            k
            for k in self.scheduler.graph.downstream((component_id, phase))
            if self.state.item(*k).status
            not in {ItemStatus.DONE, ItemStatus.FAILED, ItemStatus.POISONED}
        ]
        if downstream:
            self._log(
                ItemsPoisoned(root_component=component_id, root_phase=phase, items=downstream)
            )

    def _promote(self, component_id: str, phase: Phase) -> None:
        item = self.state.item(component_id, phase)
        assert item.output is not None
        files = self.store.get_bundle(item.output)
        paths = self.project.promote(component_id, phase, files, item.test_results)
        self._log(ArtifactsPromoted(component_id=component_id, phase=phase, paths=paths))

    # -- waiting and finishing -----------------------------------------------

    def _pending_retry_times(self) -> list[float]:
        return [
            i.retry_at
            for i in self.state.items.values()
            if i.status is ItemStatus.PENDING and i.retry_at is not None
        ]

    def _wait_for_retries(self) -> bool:
        later = [t for t in self._pending_retry_times() if t > self.clock()]
        if not later:
            return False
        time.sleep(max(0.0, min(later) - self.clock()))
        return True

    def _poll_timeout(self) -> float:
        later = self._pending_retry_times()
        if later:
            return max(0.0, min(self.poll_s, min(later) - self.clock()))
        return self.poll_s

    def _finish(self) -> None:
        statuses = [i.status for i in self.state.items.values()]
        if all(s is ItemStatus.DONE for s in statuses):
            self._log(RunCompleted())
            return
        failed = [i for i in self.state.items.values() if i.status is ItemStatus.FAILED]
        if failed:
            reason = "; ".join(
                f"{i.component_id}/{i.phase.value} failed: {i.last_error}" for i in failed
            )
        else:
            stuck = [k for k, i in self.state.items.items() if i.status is ItemStatus.PENDING]
            reason = f"no item can make progress: {', '.join(stuck)}"
        self._log(RunFailed(reason=reason))


def item_role(phase: Phase) -> str:
    from pact_workers.models.work import ROLE_FOR_PHASE

    return ROLE_FOR_PHASE[phase].value


def _dropped(result: ResultMessage, reason: str) -> ResultDropped:
    return ResultDropped(
        component_id=result.component_id,
        phase=result.phase,
        attempt=result.attempt,
        reason=reason,
    )


def summary_rows(state: RunState) -> list[dict[str, Any]]:
    """One row per component for tables and ``--json`` output."""
    assert state.tree is not None
    rows = []
    for cid in state.tree.topological_order():
        items = [state.items[k] for k in state.items if k.startswith(f"{cid}/")]
        final = items[-1]
        tr = final.test_results
        rows.append(
            {
                "component_id": cid,
                "phases": {i.phase.value: i.status.value for i in items},
                "attempts": {i.phase.value: i.attempt for i in items},
                "tests": f"{tr.passed}/{tr.total}" if tr else "",
                "cost_usd": round(sum(i.usage.cost_usd for i in items), 6),
                "poisoned_by": next((i.poisoned_by for i in items if i.poisoned_by), None),
                "last_error": next((i.last_error for i in reversed(items) if i.last_error), ""),
            }
        )
    return rows
