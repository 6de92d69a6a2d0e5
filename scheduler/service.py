"""The scheduler service: many runs at once over one fleet.

``pact scheduler --broker URL --runs-dir DIR`` takes submitted trees from Redis,
creates a run directory for each, and drives every active run with its own
:class:`RunController` over one shared :class:`CeleryFleet`. Dispatch is fair
across runs (round-robin, a run of priority p getting p + 1 items per round)
and bounded by global in-flight caps per role. Killed at any point, a restarted
service reopens its runs, adopts their in-flight attempts and reads the results
that arrived meanwhile from the stream.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

import redis
from pydantic import ValidationError

from pact_workers.artifacts import ArtifactStore, DirectoryBlobStore
from pact_workers.errors import PactError, RunDirError
from pact_workers.fleet import keys
from pact_workers.fleet.blobs import RedisBlobStore
from pact_workers.fleet.tiered import TieredBlobStore
from pact_workers.models.tree import load_tree
from pact_workers.models.work import ROLE_FOR_PHASE, ItemStatus, Phase, Role
from scheduler.executors.celery import CeleryExecutor, CeleryFleet
from scheduler.launch import start_run
from scheduler.metrics import SchedulerMetrics
from scheduler.project import ProjectDir
from scheduler.registry import RunEntry, Submission, list_runs, update_run
from scheduler.run import RunController
from scheduler.settings import load_settings
from scheduler.state import RunState

log = logging.getLogger(__name__)

#: In-flight attempts per role across all runs, unless configured otherwise.
DEFAULT_ROLE_CAP = 16
SERVICE_LOCK_TTL_S = 30
#: Runs a service drives at once; more wait, queued, in the submissions stream.
MAX_ACTIVE_RUNS = 64


@dataclass
class ActiveRun:
    entry: RunEntry
    controller: RunController
    order: int = 0


@dataclass
class SchedulerService:
    """See the module docstring. ``run_forever`` until SIGTERM or ``stop()``."""

    broker_url: str
    runs_dir: Path
    role_caps: dict[str, int] = field(default_factory=dict)
    poll_s: float = 0.5
    metrics: SchedulerMetrics | None = None
    service_id: str = field(
        default_factory=lambda: f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"
    )
    clock: Callable[[], float] = time.time

    def __post_init__(self) -> None:
        self.runs_dir = Path(self.runs_dir)
        self.fleet = CeleryFleet(self.broker_url, stream=keys.RESULTS_STREAM)
        self.client: redis.Redis = self.fleet.client
        self.active: dict[str, ActiveRun] = {}
        self._stop = threading.Event()
        self._counter = 0
        self._loops = 0
        self._ensure_submission_group()

    # -- lifecycle ------------------------------------------------------------

    def stop(self, *_: object) -> None:
        self._stop.set()

    def install_signal_handlers(self) -> None:
        def handler(signum: int, frame: FrameType | None) -> None:
            self.stop()

        signal.signal(signal.SIGTERM, handler)
        signal.signal(signal.SIGINT, handler)

    def run_forever(self) -> None:
        self.runs_dir.mkdir(parents=True, exist_ok=True)
        self._acquire_lock()
        try:
            self._reopen_active_runs()
            while not self._stop.is_set():
                self.step()
        finally:
            for run in list(self.active.values()):
                run.controller.close()
            self.active.clear()
            self._release_lock()
            self.fleet.close()

    def step(self) -> None:
        """One turn of the loop: take submissions, apply results, dispatch fairly."""
        self._renew_lock()
        self._take_submissions()
        results = self.fleet.read(self.poll_s if self.active else min(self.poll_s, 0.2))
        touched: set[str] = set()
        for result in results:
            run = self.active.get(result.run_id)
            if run is None:
                log.warning(
                    "result for run %s that this service does not drive; dropped", result.run_id
                )
                self.fleet.ack(result)
                continue
            run.controller.handle(result)
            touched.add(result.run_id)
        for run_id, run in list(self.active.items()):
            run.controller.tick(had_results=run_id in touched)
        self._dispatch_fairly()
        self._settle()
        self._publish_metrics()

    # -- submissions and runs ---------------------------------------------------

    def _ensure_submission_group(self) -> None:
        try:
            self.client.xgroup_create(
                keys.SUBMISSIONS, keys.SUBMISSIONS_GROUP, id="0", mkstream=True
            )
        except redis.ResponseError as exc:
            if "BUSYGROUP" not in str(exc):
                raise

    def _take_submissions(self) -> None:
        if len(self.active) >= MAX_ACTIVE_RUNS:
            return
        # Own pending entries first (read but not acknowledged before a crash), then new.
        for stream_id in ("0", ">"):
            reply: Any = self.client.xreadgroup(
                keys.SUBMISSIONS_GROUP, "service", {keys.SUBMISSIONS: stream_id}, count=16
            )
            for _, entries in reply or []:
                for entry_id, fields in entries:
                    self._start_submission(entry_id, fields)

    def _start_submission(self, entry_id: bytes, fields: dict[bytes, bytes]) -> None:
        try:
            sub = Submission.model_validate_json(fields[b"submission"])
        except (KeyError, ValidationError) as exc:
            log.error("malformed submission %s dropped: %s", entry_id, exc)
            self.client.xack(keys.SUBMISSIONS, keys.SUBMISSIONS_GROUP, entry_id)
            return
        project = ProjectDir(self.runs_dir / sub.run_id)
        try:
            if not project.has_run():
                project.root.mkdir(parents=True, exist_ok=True)
                tree_path = project.root / f"tree{sub.tree_suffix}"
                tree_path.write_text(sub.tree_text, encoding="utf-8")
                tree = load_tree(tree_path)
                start_run(
                    project,
                    tree,
                    tree_bytes=sub.tree_text.encode(),
                    settings=load_settings(project.settings_path),
                    agent=sub.agent,
                    agent_options=sub.agent_options,
                    sandbox=sub.sandbox,
                    run_id=sub.run_id,
                )
            update_run(
                self.client,
                sub.run_id,
                state="active",
                project_dir=str(project.root),
                name=sub.name,
                priority=sub.priority,
                submitted_at=sub.submitted_at,
            )
            self._open(sub.run_id)
        except PactError as exc:
            log.error("run %s (%s) rejected: %s", sub.run_id, sub.name, exc)
            update_run(self.client, sub.run_id, state="rejected", reason=str(exc))
        self.client.xack(keys.SUBMISSIONS, keys.SUBMISSIONS_GROUP, entry_id)

    def _reopen_active_runs(self) -> None:
        for entry in list_runs(self.client):
            if entry.state == "active" and entry.run_id not in self.active:
                try:
                    self._open(entry.run_id)
                except PactError as exc:
                    log.error("cannot reopen run %s: %s", entry.run_id, exc)

    def _open(self, run_id: str) -> None:
        if run_id in self.active:
            return
        project = ProjectDir(self.runs_dir / run_id)
        if not project.has_run():
            raise RunDirError(f"{project.root}: no run here")
        settings = load_settings(project.settings_path)
        store = ArtifactStore(
            TieredBlobStore(DirectoryBlobStore(project.artifacts_dir), RedisBlobStore(self.client))
        )
        executor = CeleryExecutor(self.fleet, run_id, capacity=10_000)
        listener = self.metrics.observe if self.metrics else None
        controller = RunController(
            project,
            executor=executor,
            store=store,
            settings=settings,
            clock=self.clock,
            listener=listener,
        )
        controller.open()
        raw = self.client.hget(keys.RUNS, run_id)
        entry = (
            RunEntry.model_validate_json(raw)
            if raw
            else RunEntry(run_id=run_id, name=run_id, state="active")
        )
        self._counter += 1
        self.active[run_id] = ActiveRun(entry=entry, controller=controller, order=self._counter)

    # -- dispatch ----------------------------------------------------------------

    def _in_flight_by_role(self) -> dict[str, int]:
        counts = {role.value: 0 for role in Role}
        for run in self.active.values():
            for item in run.controller.state.in_flight():
                counts[ROLE_FOR_PHASE[item.phase].value] += 1
        return counts

    def _dispatch_fairly(self) -> None:
        flying = self._in_flight_by_role()
        queues: list[tuple[ActiveRun, list[tuple[str, Phase]]]] = []
        ready_by_role: dict[str, int] = {}
        order = sorted(self.active.values(), key=lambda r: (-r.entry.priority, r.order))
        for run in order:
            ready = run.controller.ready()
            for _, phase in ready:
                role = ROLE_FOR_PHASE[phase].value
                ready_by_role[role] = ready_by_role.get(role, 0) + 1
            if ready:
                queues.append((run, ready))
        if self.metrics:
            self.metrics.set_ready(ready_by_role)
        while queues:
            progressed = False
            for run, ready in list(queues):
                share = 1 + run.entry.priority
                while share and ready:
                    cid, phase = ready[0]
                    role = ROLE_FOR_PHASE[phase].value
                    if flying[role] >= self.role_caps.get(role, DEFAULT_ROLE_CAP):
                        ready.pop(0)  # this role is full: skip the item this round
                        continue
                    ready.pop(0)
                    run.controller.dispatch(cid, phase)
                    flying[role] += 1
                    share -= 1
                    progressed = True
                if not ready:
                    queues.remove((run, ready))
            if not progressed:
                break

    def _settle(self) -> None:
        for run_id, run in list(self.active.items()):
            controller = run.controller
            if controller.wants_more() and not controller.settle():
                continue
            state = controller.state
            controller.close()
            self.fleet.forget_run(run_id)
            del self.active[run_id]
            update_run(
                self.client,
                run_id,
                state=state.status.value,
                **_counts(state),
                reason=state.fail_reason or state.pause_reason,
            )
            log.info("run %s %s", run_id, state.status.value)

    def _publish_metrics(self) -> None:
        self._loops += 1
        for run_id, run in self.active.items():
            if self._loops % 10 == 0:  # the registry is for people: every few seconds will do
                update_run(self.client, run_id, state="active", **_counts(run.controller.state))
        if self.metrics:
            states = [
                (e.state, RunState(), 0)
                for e in list_runs(self.client)
                if e.run_id not in self.active
            ]
            states += [("active", r.controller.state, 0) for r in self.active.values()]
            self.metrics.update(states)

    # -- the single-service lock ---------------------------------------------------

    def _acquire_lock(self) -> None:
        deadline = self.clock() + SERVICE_LOCK_TTL_S * 2
        while not self.client.set(
            keys.SERVICE_LOCK, self.service_id, nx=True, ex=SERVICE_LOCK_TTL_S
        ):
            holder = self.client.get(keys.SERVICE_LOCK)
            if self.clock() > deadline or self._stop.is_set():
                raise RunDirError(
                    f"another scheduler service ({holder!r}) holds {keys.SERVICE_LOCK}; "
                    "stop it first (or wait for its lock to expire)"
                )
            time.sleep(1.0)

    def _renew_lock(self) -> None:
        current = _text(self.client.get(keys.SERVICE_LOCK))
        if current is not None and current != self.service_id:
            raise RunDirError(f"lost the service lock to {current!r}; stopping")
        self.client.set(keys.SERVICE_LOCK, self.service_id, ex=SERVICE_LOCK_TTL_S)

    def _release_lock(self) -> None:
        try:
            if _text(self.client.get(keys.SERVICE_LOCK)) == self.service_id:
                self.client.delete(keys.SERVICE_LOCK)
        except redis.RedisError:
            pass


def _counts(state: RunState) -> dict[str, object]:
    return {
        "items_done": sum(i.status is ItemStatus.DONE for i in state.items.values()),
        "items_total": len(state.items),
        "cost_usd": round(state.usage.cost_usd, 6),
    }


def _text(value: Any) -> str | None:
    if value is None:
        return None
    return value.decode() if isinstance(value, bytes) else str(value)
