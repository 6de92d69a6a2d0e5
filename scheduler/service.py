"""The scheduler service: many runs at once over one fleet, shared by any number of services.

``pact scheduler --broker URL --runs-dir DIR`` takes submitted trees from Redis,
creates a run directory for each, and drives every run it owns with its own
:class:`RunController` over one shared :class:`CeleryFleet`. Any number of services
may run against one Redis and one runs directory (the same filesystem, mounted on
every machine that runs a service); they share the runs, and each run is driven by
exactly one of them at a time.

How the work is shared:

- **Ownership.** A service drives a run only while it holds the run's lease, with a
  fencing token (:mod:`scheduler.ownership`). It extends all its leases once per
  loop, and the run's audit log checks (and extends) the lease before every fsynced
  write: a service that lost a run, even one paused and resumed long after, cannot
  append a line to it. A service that finds a lease gone drops that run (closes it
  without writing anything, not even a snapshot) and carries on with the others.
- **Adoption.** Every second (every eighth of a TTL, if that is shorter) a service
  looks for active runs whose lease nobody holds (``pact:runs:active`` against
  ``pact:owner:<run>``), takes the lease with a new token and reopens the run from
  its log, as a restarted service would: in-flight attempts are adopted, not
  dispatched again (only those whose message may never have been sent are). A
  SIGKILLed service's runs are thus taken within one lease TTL plus a scan. A run
  still locked by a process on this machine (a paused owner) is left until that
  process lets go. A clean stop releases every lease, so others adopt at once.
- **Submissions.** Each service reads ``pact:submissions`` as a consumer of its own
  in the group ``service``; an entry a service read and never acknowledged (it died
  in between) is claimed by another after a lease TTL (XAUTOCLAIM). The run's lease
  decides who creates the run, and a run that already exists is only adopted.
- **Results.** Each run has a result stream of its own (``pact:results:<run>``, its
  tasks' ``reply_to``), read by its owner as the one consumer ``scheduler`` of the
  group ``scheduler``. A result therefore only ever reaches the service that owns its
  run: nothing needs forwarding, and a result read by an owner that then lost the
  run stays pending under the same consumer name, so the next owner reads it first
  (and claims what a paused ex-owner read later, once idle). One shared stream would
  hand each result to whichever service read first: the others would have to pass
  it on or leave it to an idle claim, a result applied by a non-owner would be
  applied outside the fence, and every failover would stall results for a claim
  interval. The price is one stream per run, all read in one blocking XREADGROUP.
- **Fair dispatch and caps.** Within a service, dispatch is round-robin across its
  runs, a run of priority p getting p + 1 items per round. ``--max-in-flight`` caps
  are global, not per service: each loop one script (:mod:`scheduler.capacity`)
  records the in-flight attempts of each run this service owns and its ready items
  per role, and grants the slots it may use: at most the cap minus every run's
  attempts in flight (whoever owns it, so a handover neither frees nor doubles a
  slot), shared in proportion to the ready items when other services wait too.
- **Balance.** A service takes new runs (submissions and orphans) only up to
  ``--max-runs``, and while other services drive fewer runs it takes one per loop,
  so that runs spread evenly.
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

from redis.exceptions import RedisError

from pact_workers.models.work import ROLE_FOR_PHASE, ItemStatus, ResultMessage, Role
from scheduler.capacity import FleetCaps
from scheduler.executors.celery import CeleryFleet
from scheduler.fairness import Turn, dispatch_in_turns
from scheduler.intake import Intake, open_run, room_for_runs
from scheduler.metrics import SchedulerMetrics
from scheduler.ownership import LeaseLost, RunLeases
from scheduler.project import ProjectDir
from scheduler.registry import (
    RunEntry,
    SubmissionQueue,
    get_run,
    index_active_runs,
    list_runs,
    update_run,
)
from scheduler.run import RunController
from scheduler.state import RunState

log = logging.getLogger(__name__)

#: In-flight attempts per role across the fleet, unless configured otherwise.
DEFAULT_ROLE_CAP = 16
#: Runs one service drives at once (``--max-runs``); more wait for another service.
MAX_ACTIVE_RUNS = 64
#: Seconds a run's lease lives without renewal (``--lease-ttl``).
DEFAULT_LEASE_TTL_S = 10.0
#: How often (at most) a service looks for runs to adopt; less for short lease TTLs.
ORPHAN_SCAN_S = 1.0
#: A run this service could not open is left to others for this many lease TTLs.
UNOPENABLE_TTLS = 10
#: A submissions consumer idle this long with nothing pending is a service long gone.
CONSUMER_FORGOTTEN_AFTER_S = 24 * 3600


@dataclass
class ActiveRun:
    entry: RunEntry
    controller: RunController
    token: int
    order: int = 0


def new_service_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"


@dataclass
class SchedulerService:
    """See the module docstring. ``run_forever`` until SIGTERM or ``stop()``."""

    broker_url: str
    runs_dir: Path
    role_caps: dict[str, int] = field(default_factory=dict)
    poll_s: float = 0.5
    metrics: SchedulerMetrics | None = None
    service_id: str = field(default_factory=new_service_id)
    clock: Callable[[], float] = time.time
    lease_ttl_s: float = DEFAULT_LEASE_TTL_S
    max_runs: int = MAX_ACTIVE_RUNS

    def __post_init__(self) -> None:
        self.runs_dir = Path(self.runs_dir)
        # Several renewals per TTL, however long the configured poll.
        self.poll_s = min(self.poll_s, self.lease_ttl_s / 4)
        ttl_ms = max(1, round(self.lease_ttl_s * 1000))
        self.fleet = CeleryFleet(self.broker_url, claim_idle_ms=ttl_ms)
        self.client = self.fleet.client
        self.leases = RunLeases(self.client, self.service_id, self.lease_ttl_s)
        self.caps = FleetCaps(
            self.client,
            self.service_id,
            caps={r.value: self.role_caps.get(r.value, DEFAULT_ROLE_CAP) for r in Role},
            ttl_s=self.lease_ttl_s,
        )
        self.submissions = SubmissionQueue(
            self.client, self.service_id, claim_idle_s=self.lease_ttl_s
        )
        self.intake = Intake(
            client=self.client,
            leases=self.leases,
            submissions=self.submissions,
            runs_dir=self.runs_dir,
            retry_after_s=UNOPENABLE_TTLS * self.lease_ttl_s,
            scan_every_s=min(ORPHAN_SCAN_S, self.lease_ttl_s / 8),
            clock=self.clock,
            open_run=self._open,
        )
        self.active: dict[str, ActiveRun] = {}
        #: Runs driven by each other live service (from the last loop's grant).
        self.others: dict[str, int] = {}
        self._stop = threading.Event()
        self._counter = 0
        self._loops = 0

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
        index_active_runs(self.client)
        self.submissions.forget_idle_consumers(CONSUMER_FORGOTTEN_AFTER_S)
        # Announce this service and learn of the others before taking any run.
        self.others = self.caps.reserve({}, {}).others
        try:
            while not self._stop.is_set():
                try:
                    self.step()
                except RedisError as exc:
                    # Leases that expire meanwhile are found lost at the next renewal.
                    log.warning("scheduler loop: Redis failed (%s); trying again", exc)
                    self._stop.wait(self.poll_s)
        finally:
            self.shutdown()

    def shutdown(self) -> None:
        """Close every run (its final snapshot), send and acknowledge what is logged,
        then release the leases: other services adopt the runs at once."""
        held: dict[str, int] = {}
        for run_id, run in list(self.active.items()):
            try:
                self.leases.check(run_id, run.token)
            except LeaseLost as exc:
                self._drop(run_id, str(exc))
                continue
            held[run_id] = run.token
        counts = self._in_flight_by_run()
        for run_id, run in list(self.active.items()):
            run.controller.close()
            self.fleet.forget_run(run_id)
        self.active.clear()
        try:
            self.fleet.flush()
            self.fleet.flush_acks()
            # The runs' attempts stay counted for their next owners, then the leases go.
            self.caps.leave(counts)
            for run_id, token in held.items():
                self.leases.release(run_id, token)
            self.submissions.leave()
        except RedisError as exc:
            log.warning("could not release this scheduler's leases (they expire): %s", exc)
        finally:
            self.fleet.close()

    def step(self) -> None:
        """One turn of the loop: keep the leases, take runs, apply results, dispatch."""
        self._renew()
        room = room_for_runs(len(self.active), self.max_runs, self.others)
        room -= self.intake.adopt_orphans(room, self.active)
        self.intake.take_submissions(room)
        results = self.fleet.read(self.poll_s if self.active else min(self.poll_s, 0.2))
        touched: set[str] = set()
        by_run: dict[str, list[ResultMessage]] = {}
        for result in results:
            by_run.setdefault(result.run_id, []).append(result)
        for run_id, mine in by_run.items():
            if run_id in self.active:
                self.active[run_id].controller.prefetch(mine)
        for result in results:
            run = self.active.get(result.run_id)
            # None: the run was dropped this loop; its result stays for the next owner.
            if run is not None and self._guarded(result.run_id, run.controller.handle, result):
                touched.add(result.run_id)
        for run_id, run in list(self.active.items()):
            self._guarded(run_id, run.controller.tick, had_results=run_id in touched)
        self._dispatch_fairly()
        for run_id, run in list(self.active.items()):
            self._guarded(run_id, run.controller.commit)  # sends what was dispatched
        self.fleet.flush()
        self._settle()
        self._publish_metrics()

    # -- ownership ---------------------------------------------------------------

    def _renew(self) -> None:
        lost = self.leases.renew({run_id: run.token for run_id, run in self.active.items()})
        for run_id in lost:
            self._drop(run_id, "its lease expired or another scheduler took it")

    def _guarded(
        self, run_id: str, call: Callable[..., object], *args: object, **kw: object
    ) -> bool:
        """Run ``call`` for one run; a lost lease drops that run only. True if it ran."""
        try:
            call(*args, **kw)
        except LeaseLost as exc:
            self._drop(run_id, str(exc))
            return False
        return True

    def _drop(self, run_id: str, why: str) -> None:
        """Give up a run this service no longer owns, writing nothing to it."""
        run = self.active.pop(run_id, None)
        if run is None:
            return
        # Not controller.close(): that writes a snapshot, and the run is another's now.
        run.controller.abandon()
        self.fleet.forget_run(run_id)
        log.warning("run %s given up: %s", run_id, why)

    # -- submissions and runs ---------------------------------------------------

    def _open(self, run_id: str, token: int) -> None:
        """Open a run this service holds the lease of (token ``token``) and drive it."""
        controller = open_run(
            ProjectDir(self.runs_dir / run_id),
            run_id,
            fleet=self.fleet,
            client=self.client,
            clock=self.clock,
            listener=self.metrics.observe if self.metrics else None,
            fence=self.leases.fence(run_id, token),
        )
        # The moment the run is this service's (``pact runs`` shows it).
        update_run(
            self.client, run_id, owner=self.service_id, owner_since=time.time(), lease_token=token
        )
        entry = get_run(self.client, run_id) or RunEntry(run_id=run_id, name=run_id, state="active")
        self._counter += 1
        self.active[run_id] = ActiveRun(
            entry=entry, controller=controller, token=token, order=self._counter
        )

    # -- dispatch ----------------------------------------------------------------

    def _in_flight_by_run(self) -> dict[str, dict[str, int]]:
        counts: dict[str, dict[str, int]] = {}
        for run_id, run in self.active.items():
            mine = counts[run_id] = {}
            for item in run.controller.state.in_flight():
                role = ROLE_FOR_PHASE[item.phase].value
                mine[role] = mine.get(role, 0) + 1
        return counts

    def _dispatch_fairly(self) -> None:
        turns: list[Turn] = []
        ready_by_role: dict[str, int] = {}
        for run in sorted(self.active.values(), key=lambda r: (-r.entry.priority, r.order)):
            ready = run.controller.ready()
            for _, phase in ready:
                role = ROLE_FOR_PHASE[phase].value
                ready_by_role[role] = ready_by_role.get(role, 0) + 1
            turns.append(Turn(1 + run.entry.priority, ready, run.controller.dispatch))
        if self.metrics:
            self.metrics.set_ready(ready_by_role)
        grant = self.caps.reserve(self._in_flight_by_run(), ready_by_role)
        self.others = grant.others
        dispatch_in_turns(turns, grant.slots)

    def _settle(self) -> None:
        for run_id, run in list(self.active.items()):
            controller = run.controller
            try:
                if controller.wants_more() and not controller.settle():
                    continue
                # The final snapshot marks the log as it is: only its owner may write it.
                self.leases.check(run_id, run.token)
            except LeaseLost as exc:
                self._drop(run_id, str(exc))
                continue
            state = controller.state
            controller.close()
            self.fleet.forget_run(run_id, finished=True)
            del self.active[run_id]
            update_run(
                self.client,
                run_id,
                state=state.status.value,
                **_counts(state),
                reason=state.fail_reason or state.pause_reason,
                owner=self.service_id,
            )
            self.caps.forget_run(run_id)
            self.leases.release(run_id, run.token)
            log.info("run %s %s", run_id, state.status.value)

    def _publish_metrics(self) -> None:
        self._loops += 1
        for run_id, run in self.active.items():
            if self._loops % 10 == 0:  # the registry is for people: every few seconds will do
                update_run(self.client, run_id, **_counts(run.controller.state))
        if self.metrics:
            states = [
                (e.state, RunState(), 0)
                for e in list_runs(self.client)
                if e.run_id not in self.active
            ]
            states += [("active", r.controller.state, 0) for r in self.active.values()]
            self.metrics.update(states)
            self.metrics.count_packed(self.fleet.packer.packed_attempts)


def _counts(state: RunState) -> dict[str, object]:
    return {
        "items_done": sum(i.status is ItemStatus.DONE for i in state.items.values()),
        "items_total": len(state.items),
        "cost_usd": round(state.usage.cost_usd, 6),
    }
