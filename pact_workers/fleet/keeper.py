"""One thread per worker process that keeps every lease the process holds alive.

A worker's pool process runs attempts one after the other, often many short ones
in a row. Each attempt used to start a renewal thread of its own and join it at the
end: a thread start, a join and a wake-up per attempt, a few per cent of a worker's
CPU on attempts that take milliseconds. Here one daemon thread per process renews
each held lease when its turn comes (every ``ttl_s / 3`` from when it was taken)
and writes a lease's new stage shortly after the attempt reports it, so an attempt
that ends first never writes it at all. An attempt's start and stage do not wake the
thread (a wake-up costs as much as the rest of the bookkeeping): while it keeps
leases it looks at them every tick, and it is woken only when it had none.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from typing import Protocol

__all__ = ["STAGE_DELAY_S", "LeaseKeeper"]

log = logging.getLogger(__name__)

#: How long after an attempt reports a new stage its lease is due to say so (sooner
#: when its renewal is due first); written at the keeper's next tick. A scheduler reads
#: the stages every second (at most every ``ttl_s / 4``), so a stage shorter than
#: this was rarely seen anyway.
STAGE_DELAY_S = 0.25


class Renewable(Protocol):
    """What the keeper renews: a held lease (``LeaseHold``)."""

    def renew(self) -> bool:
        """Renew once; False when renewing should stop (the attempt was superseded)."""
        ...


class LeaseKeeper:
    """Renews the leases held in this process, each every ``interval_s``, from one thread.

    The thread starts with the first lease and then waits for work; it is a daemon,
    so it never keeps a process alive. A forked child (a Celery pool process) gets a
    keeper of its own on first use: the parent's thread is not copied by a fork.

    Args:
        interval_s: the time between two renewals of one lease; each is done at the
            first tick after it is due.
        give_up_s: the longest :meth:`remove` waits for a renewal in progress.
    """

    def __init__(self, interval_s: float, *, give_up_s: float) -> None:
        self.interval_s = interval_s
        self.give_up_s = give_up_s
        #: How often the thread looks at the leases it keeps: a renewal is at most this
        #: late, and still leaves a lease a third of its TTL.
        self.tick_s = min(STAGE_DELAY_S, interval_s)
        self._start_afresh()

    def _start_afresh(self) -> None:
        self._pid = os.getpid()
        self._cond = threading.Condition()
        #: When each held lease is due (time.monotonic()).
        self._due: dict[Renewable, float] = {}
        self._renewing: Renewable | None = None
        self._thread: threading.Thread | None = None
        #: The thread waits with no lease to keep: only a notify wakes it.
        self._idle = False

    def add(self, lease: Renewable) -> None:
        """Renew ``lease`` every ``interval_s`` from now on."""
        if self._pid != os.getpid():
            self._start_afresh()
        with self._cond:
            self._due[lease] = time.monotonic() + self.interval_s
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._loop, name="leases", daemon=True)
                self._thread.start()
            elif self._idle:
                self._cond.notify()

    def soon(self, lease: Renewable, delay_s: float) -> None:
        """Renew ``lease`` at the first tick ``delay_s`` from now (its value changed), if
        it is still kept."""
        with self._cond:
            due = self._due.get(lease)
            if due is not None:
                self._due[lease] = min(due, time.monotonic() + delay_s)

    def remove(self, lease: Renewable) -> None:
        """Stop renewing ``lease``. Returns once no renewal of it is in progress (or after
        ``give_up_s``), so nothing renews it after its holder deleted it."""
        deadline = time.monotonic() + self.give_up_s
        with self._cond:
            self._due.pop(lease, None)
            while self._renewing is lease:
                left = deadline - time.monotonic()
                if left <= 0:
                    log.warning("a renewal outlasted %.1f s; not waiting for it", self.give_up_s)
                    return
                self._cond.wait(left)

    def kept(self) -> int:
        """How many leases are being renewed."""
        with self._cond:
            return len(self._due)

    def _loop(self) -> None:
        with self._cond:
            while True:
                if not self._due:
                    self._idle = True
                    self._cond.wait()
                    self._idle = False
                    continue
                lease, at = min(self._due.items(), key=lambda item: item[1])
                wait = at - time.monotonic()
                if wait > 0:
                    self._cond.wait(min(wait, self.tick_s))
                    continue
                self._renewing = lease
                self._cond.release()
                try:
                    keep = self._renew(lease)
                finally:
                    self._cond.acquire()
                    self._renewing = None
                    self._cond.notify_all()
                if lease in self._due:
                    if keep:
                        self._due[lease] = time.monotonic() + self.interval_s
                    else:
                        del self._due[lease]

    @staticmethod
    def _renew(lease: Renewable) -> bool:
        try:
            return lease.renew()
        except Exception:  # a renewal bug must not stop the renewals of every lease
            log.exception("unexpected error renewing a lease")
            return True
