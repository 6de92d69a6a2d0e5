"""The write-ahead side of a run: events staged and folded into the state, made
durable together (group commit), the effects that wait for them, and snapshots.

Rule: nothing outside the process (a task submitted, a result acknowledged, a file
promoted into the project) happens before the event that decided it is on disk.
So every decision is *staged* (folded into the in-memory state at once, since the
next decision depends on it), its effect is queued, and :meth:`RunJournal.commit`
writes and fsyncs the staged events once and only then carries out the effects.
A crash before the commit loses decisions that nothing acted on yet.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from scheduler.audit import AuditLog
from scheduler.events import Event
from scheduler.fold import apply
from scheduler.project import ProjectDir
from scheduler.state import RunState

Listener = Callable[[Event, RunState], None]

#: A snapshot (state.json) is written after this many events or seconds, and on close.
SNAPSHOT_EVERY_EVENTS = 2000
SNAPSHOT_EVERY_S = 10.0
#: ... and, timed, never more often than this many times its own writing time: a large
#: run's snapshot takes a sizeable fraction of a second, which should stay a small
#: share (here 1/20) of the loop's time.
SNAPSHOT_SHARE = 20.0


class RunJournal:
    """One run's audit log as the run loop writes it; see the module docstring."""

    def __init__(
        self,
        project: ProjectDir,
        *,
        listener: Listener | None = None,
        fence: Callable[[], None] | None = None,
        before_commit: Callable[[], None] | None = None,
        audit: AuditLog | None = None,
    ) -> None:
        """``audit``: the run's log as a caller already holds it open (a resume, which
        must hold the run from its checks on); it is released with the journal."""
        self.project = project
        #: Called before staged events are written: makes what they name durable (the
        #: artifact store's deferred writes), so that no event outlives its data.
        self.before_commit = before_commit
        self.listener = listener
        self.audit = audit if audit is not None else AuditLog(project.audit_path)
        self.audit.fence = fence
        self.state = RunState()
        self._effects: list[Callable[[], None]] = []
        self._snapshot_seq = 0
        self._snapshot_at = time.monotonic()
        self._snapshot_cost_s = 0.0

    def open(self) -> None:
        """Take the run's lock (the caller then folds the log into :attr:`state`, and
        says so with :meth:`loaded`); a log handed over open is held already."""
        if not self.audit.is_open:
            self.audit.open()

    def loaded(self, state: RunState, covered: int | None) -> None:
        """The log, folded: ``state``, from a snapshot of the events up to ``covered``
        (None: from no snapshot). The next periodic snapshot is due as many events after
        that one as any other, not at once: rewriting a state.json that is up to date
        costs more than a second at 10,000 components."""
        self.state = state
        self._snapshot_seq = covered or 0

    def log(self, event: Event) -> Event:
        """Stage ``event`` (durable at the next :meth:`commit`) and fold it in."""
        stored = self.audit.stage(event)
        apply(self.state, stored)
        if self.listener is not None:
            self.listener(stored, self.state)
        return stored

    def after_commit(self, effect: Callable[[], None]) -> None:
        """Run ``effect`` once the events staged so far are on disk."""
        self._effects.append(effect)

    def commit(self) -> None:
        """Make the staged events durable (one fsync), then carry out their effects."""
        if self.audit.staged and self.before_commit is not None:
            self.before_commit()
        self.audit.commit()
        effects, self._effects = self._effects, []
        for effect in effects:
            effect()

    def commit_all(self) -> None:
        """Commit, and again while the effects staged events of their own (a promotion
        records itself): what a loop does last, so that nothing acted on is left
        staged, and the final snapshot, written only with nothing staged, is written."""
        self.commit()
        while self.audit.staged:
            self.commit()

    def snapshot(self, *, every: int = 0, every_s: float = 0.0) -> None:
        """Write state.json when ``every`` events or ``every_s`` seconds have passed since
        the last one (both 0: now, and only with nothing staged). A snapshot marks the
        log it covers, so only a state with nothing staged is written: a periodic one
        that falls due while the effects of the last commit have staged their records
        (promotions do, after every commit with a success) commits those first."""
        if self.audit.staged and not (every or every_s):
            return
        # Wall-clock time, not the run's clock: a simulated run's clock leaps ahead.
        now = time.monotonic()
        due = self.state.last_seq - self._snapshot_seq >= every or (
            every_s > 0
            and now - self._snapshot_at >= max(every_s, SNAPSHOT_SHARE * self._snapshot_cost_s)
        )
        if not due or (every and self.state.last_seq == self._snapshot_seq):
            return
        if self.audit.staged:
            self.commit_all()
        self.project.write_state(self.state, log_offset=self.audit.size)
        self._snapshot_seq = self.state.last_seq
        self._snapshot_at = time.monotonic()
        self._snapshot_cost_s = self._snapshot_at - now

    def snapshot_now_and_then(self) -> None:
        """A snapshot every :data:`SNAPSHOT_EVERY_S` seconds, or every
        :data:`SNAPSHOT_EVERY_EVENTS` events (more for a large run: writing one costs
        O(items), so a run of n items writes one every n events at most)."""
        every = max(SNAPSHOT_EVERY_EVENTS, len(self.state.items))
        self.snapshot(every=every, every_s=SNAPSHOT_EVERY_S)

    def abandon(self) -> None:
        """Release the run writing nothing (it is another process's now)."""
        self.audit.close()

    def close(self) -> None:
        """Write the final snapshot and release the run.

        Events still staged were never acted on and are dropped (a step cut short by
        an exception); the snapshot is then skipped too, since the state holds them.
        """
        try:
            if not self.audit.staged:
                self.snapshot()
        finally:
            self.audit.close()
