"""The run loop: fold the log, dispatch the ready set, apply results, repeat.

Every decision is written to the audit log (flushed and fsynced) before it is
acted on, and the state is only ever changed by folding that event. After a
crash, opening the run again replays the log and carries on from there.

Policies are wired in here: the failure policy decides retries, the budget is
checked before every dispatch, every in-flight attempt has a stall timeout
per role (its lease), and systemic detection runs after every batch of results.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable

from pact_workers.artifacts import ArtifactStore
from pact_workers.models.work import (
    ItemStatus,
    Phase,
    ResultMessage,
)
from scheduler.audit import AuditLog
from scheduler.cache import ActionCache
from scheduler.dispatching import Dispatching
from scheduler.events import (
    Event,
    RunCompleted,
    RunFailed,
)
from scheduler.executors.base import Executor
from scheduler.gates.handling import GateHandling
from scheduler.gates.keeper import GateKeeper
from scheduler.journal import Listener, RunJournal
from scheduler.launch import load_run
from scheduler.leases import LeaseBook, interrupted
from scheduler.leasewatch import LeaseWatching
from scheduler.lifecycle.cancelling import CancelHandling
from scheduler.lifecycle.progress import ProgressReporting
from scheduler.outcomes import ResultHandling
from scheduler.pactimport.runcache import run_cache_for
from scheduler.project import ProjectDir
from scheduler.provenance.lessons import lessons_key, prior_lessons, retrospect
from scheduler.provenance.promotion import restore_provenance
from scheduler.settings import Settings
from scheduler.snapshot import LogMark, log_mark
from scheduler.state import RunState, RunStatus
from scheduler.verdicts import run_end
from scheduler.wavefront import WavefrontScheduler

log = logging.getLogger(__name__)


class RunController(
    Dispatching, ResultHandling, GateHandling, CancelHandling, ProgressReporting, LeaseWatching
):
    """Drives one run to a terminal or paused state with one executor."""

    def __init__(
        self,
        project: ProjectDir,
        *,
        executor: Executor,
        store: ArtifactStore,
        settings: Settings,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], None] = time.sleep,
        listener: Listener | None = None,
        rng: random.Random | None = None,
        poll_s: float = 0.5,
        stop: threading.Event | None = None,
        fence: Callable[[], None] | None = None,
        cache: ActionCache | None = None,
        loaded: tuple[RunState, LogMark] | None = None,
        audit: AuditLog | None = None,
    ) -> None:
        """``loaded``: the run's state as the caller just folded and snapshotted it (a
        resume), with the mark of the log it covers: taken as the fold on open if the
        log still ends there, instead of reading state.json again. ``audit``: the run's
        log, open, when the caller holds the run already (a resume); released on close."""
        self.project = project
        self._loaded = loaded
        self.executor = executor
        self.store = store
        self.settings = settings
        self.clock = clock
        self.sleep = sleep
        self.rng = rng or random.Random()
        self.poll_s = poll_s
        #: Set (by a signal handler) to stop between steps: the run is left interrupted.
        self.stop = stop
        #: The audit log, the state folded from it, and the effects waiting for it.
        self.journal = RunJournal(
            project,
            listener=listener,
            fence=fence,
            before_commit=self._make_durable,
            audit=audit,
        )
        self.scheduler: WavefrontScheduler | None = None
        #: What one attempt of each phase may cost before any has been seen (per run).
        self._prior_usd: dict[Phase, float] | None = None
        #: The lease of every in-flight attempt, renewed by worker activity.
        self.leases = LeaseBook(self.clock)
        #: The action cache (None: not used); pact.yaml's ``cache:`` says how.
        # A run that imported a Pact project is served its artifacts first (pactimport).
        self.cache = run_cache_for(project, cache, settings.cache)
        #: Lessons of earlier runs (``scheduler.provenance.lessons``), loaded on open.
        self.lessons: list[str] = []
        #: Whether this session logged the run's end (its retrospective is due at close).
        self._ended = False
        #: Scores every dispatch and says whether it is a teachback (``scheduler.gates``).
        self.gatekeeper = GateKeeper(settings.gates, pact_dir=project.pact, store=store)

    # -- lifecycle --------------------------------------------------------

    def drive(self) -> RunState:
        """Run until the run completes, fails or pauses; returns the final state.

        A paused run dispatches nothing more but still applies the results of
        attempts already in flight, so no finished work is thrown away.
        """
        self.open()
        try:
            while self.wants_more() and not self.stopping():
                # One commit per turn: the last turn's results and checks with the
                # dispatches they made ready (each acted on only once on disk).
                self.dispatch_ready()
                self.journal.snapshot_now_and_then()
                if not self.state.in_flight():
                    # A retry may have fallen due since the dispatch above looked at
                    # the clock: it is ready now, not stuck.
                    if self._wait_for_retries() or self.ready():
                        continue
                    self.finish()
                    break
                results = self.executor.poll(self._poll_timeout())
                self.prefetch(results)
                # Stages an attempt reported before its result are logged before it: an
                # attempt that ran and verified within one turn still shows both.
                self.report_progress()
                for result in results:
                    self.handle(result)
                self.tick(had_results=bool(results), commit=False)
            self.journal.commit_all()
            return self.state
        finally:
            self.close()

    # The steps of ``drive``, public so that the scheduler service can interleave
    # many runs over one shared executor.

    @property
    def state(self) -> RunState:
        return self.journal.state

    def open(self) -> None:
        """Take the run's lock, fold its log and recover from whatever stopped it."""
        self.journal.open()
        try:
            self._recover()
            self.commit()
            # What earlier runs configured the same way learned, for the authors' prompts.
            self.lessons = prior_lessons(self.project.root, self._lessons_key())
        except BaseException:
            # Nothing of a run that could not be opened is written (not even a
            # snapshot, of a state that never held it).
            self.journal.abandon()
            raise

    def close(self) -> None:
        """Write the final snapshot and release the run; a run that ended here leaves
        its retrospective (after the snapshot: a kill meanwhile loses nothing of it)."""
        self.journal.close()
        if self._ended:
            self._retrospect()

    def abandon(self) -> None:
        """Release the run writing nothing, not even a snapshot (another scheduler
        owns it now)."""
        self.journal.abandon()

    def commit(self) -> None:
        """Make the staged events durable (one fsync), then carry out their effects."""
        self.journal.commit()

    def prefetch(self, results: list[ResultMessage]) -> None:
        """Fetch the outputs of ``results`` together, before each is handled (a store
        with a remote tier then makes two round trips for the lot, not two per result)."""
        self.store.prefetch([r.output for r in results if r.output is not None])

    def _make_durable(self) -> None:
        """Before events are committed: what they name is made durable first (blobs the
        store deferred, files promoted since the last commit)."""
        self.store.sync()
        self.project.sync()

    def _after_commit(self, effect: Callable[[], None]) -> None:
        self.journal.after_commit(effect)

    def _log(self, event: Event) -> Event:
        stored = self.journal.log(event)
        if self.scheduler is not None:
            self.scheduler.observe(stored, self.state)
        if isinstance(stored, RunCompleted | RunFailed):
            # Every run that ends, completed or failed, leaves its retrospective.
            self._ended = True
        return stored

    def _lessons_key(self) -> str:
        return lessons_key(self.settings, self.state.agent_options)

    def _retrospect(self) -> None:
        retrospect(self.project.root, self._lessons_key())

    def stopping(self) -> bool:
        """True once asked to stop (e.g. Ctrl-C): the run stays interrupted, for resume."""
        return self.stop is not None and self.stop.is_set()

    def wants_more(self) -> bool:
        """Active, or paused with attempts still in flight whose results we keep."""
        return self.state.status is RunStatus.ACTIVE or (
            self.state.status is RunStatus.PAUSED and bool(self.state.in_flight())
        )

    def tick(self, *, had_results: bool, commit: bool = True) -> None:
        """After the results of a turn: cancels, reviews, leases, lost workers and
        systemic detection; then (``commit``) commit all of it with the results, and a
        snapshot now and then. The checks read the folded state, which holds what was
        staged, so one commit serves both; ``commit=False`` leaves it to the caller's
        next commit (the single-run loop's dispatch, one sync per turn)."""
        self.take_cancel()  # pact cancel (scheduler.lifecycle.cancelling)
        self._take_reviews()  # pact approve/reject --broker (scheduler.gates.fleet)
        self._renew_leases()
        self._expire_leases()
        self._reclaim_lost()
        if had_results and self.state.status is RunStatus.ACTIVE:
            self._detect_systemic()
        # Running / verifying as workers report them (after the verdicts on results).
        self.report_progress()
        if commit:
            self.commit()
            self.journal.snapshot_now_and_then()

    def settle(self) -> bool:
        """When nothing is in flight or waiting for a retry, end the run; True if it ended."""
        if self.state.in_flight() or not self.wants_more():
            return not self.wants_more()
        if [t for t in self.state.retry_times() if t > self.clock()]:
            return False
        if self.ready():
            return False
        self.finish()
        return True

    def _recover(self) -> None:
        loaded, self._loaded = self._loaded, None
        warnings: list[str] = []
        covered: int | None
        if loaded is not None and log_mark(self.project.audit_path) == loaded[1]:
            # The snapshot just written holds this very state (its warnings were the
            # caller's to give): reading it back costs seconds at 10,000 components.
            state, covered = loaded[0], loaded[0].last_seq
            state.warnings = []
        else:
            state, warnings, covered = load_run(self.project)
        self.journal.loaded(state, covered)
        for warning in warnings:
            log.warning(warning)
        assert self.state.tree is not None  # load_run refuses a log without a run
        self.scheduler = WavefrontScheduler(
            self.state.tree,
            dependencies=self.state.dependencies,
            max_concurrent_agents=min(
                self.settings.max_concurrent_agents or self.executor.capacity,
                self.executor.capacity,
            ),
            mode=self.settings.scheduling,
        )
        self.scheduler.sync(self.state)
        self.project.sweep_staging()
        in_flight = [(i.component_id, i.phase, i.attempt) for i in self.state.in_flight()]
        if self.executor.survives_restart:
            # Attempts in flight on a fleet keep running while the scheduler is down;
            # their results wait in the stream. Watch their leases again.
            self.executor.adopt(in_flight)
            for lease in in_flight:
                self.leases.grant(lease)
        else:
            # In-process attempts died with the previous scheduler: dispatch them again
            # under a new attempt number.
            for lease in in_flight:
                self._log(interrupted(lease, self.clock()))
        # Verified outputs whose promotion a crash cut short, or whose files have
        # gone missing from the project since, are promoted (again) from the store.
        # Files that exist but differ are left alone: that is drift, for a human.
        for item in list(self.state.items.values()):
            if item.status is ItemStatus.DONE and (
                not item.promoted
                or self.project.files_missing(
                    item.component_id, item.phase, item.output, self.store, item.files
                )
            ):
                self._promote(item.component_id, item.phase)
        # Sidecars and baselines lost since (or never written) are made from the log.
        restore_provenance(self.project, self.state, self.store)

    # -- waiting and finishing -----------------------------------------------

    def _wait_for_retries(self) -> bool:
        if self.state.status is not RunStatus.ACTIVE:
            return False
        later = [t for t in self.state.retry_times() if t > self.clock()]
        if not later:
            return False
        wait_s = max(0.0, min(later) - self.clock())
        if self.stop is not None:
            wait_s = min(wait_s, self.poll_s)  # stay responsive to a stop request
        self.sleep(wait_s)
        return True

    def _poll_timeout(self) -> float:
        later = self.state.retry_times()
        if later:
            return max(0.0, min(self.poll_s, min(later) - self.clock()))
        return self.poll_s

    def finish(self) -> None:
        """Log the run's end: completed when every item is done, else failed."""
        if self.state.status is not RunStatus.ACTIVE:
            return
        if self._pause_for_review():
            self.commit()
            return
        self._log(run_end(self.state))
        self.commit()
