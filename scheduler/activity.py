"""Idle detection that counts only genuine idleness (seed 000, 1.3).

The old daemon measured wall-clock time since the last FIFO signal and killed runs
that were busy making long API calls. :class:`ActivityTracker` resets on any
meaningful activity, is never idle while work is in progress, and stays busy for a
grace period after a state transition. It takes an injectable clock so that tests
(and replays) can drive time.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager

__all__ = ["ACTIVITY_TYPES", "STATE_TRANSITION_GRACE_S", "ActivityTracker"]

#: The activities that count as "not idle".
ACTIVITY_TYPES = frozenset(
    {"api_call", "state_transition", "audit_entry", "fifo_signal", "heartbeat", "dispatch"}
)

#: Seconds after a state transition during which the tracker is never idle (seed
#: invariant), whatever ``max_idle`` a caller asks about: a transition usually starts work.
STATE_TRANSITION_GRACE_S = 60.0


class ActivityTracker:
    """Tracks activity so that an idle timeout only fires when nothing is happening.

    Thread-safe: agents report from worker threads while the control loop asks.

    Example::

        tracker = ActivityTracker()
        with tracker.active("api_call"):
            response = client.call(...)   # never idle meanwhile, however long it takes
        if tracker.is_idle(max_idle=600):
            shut_down()
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        """Start the idle timer now, as if an activity had just been recorded.

        Args:
            clock: Seconds from an arbitrary origin; must not go backwards.
        """
        self._clock = clock
        self._lock = threading.Lock()
        self._last_activity_s = clock()
        self._last_transition_s: float | None = None
        self._last_type: str | None = None
        self._in_progress: Counter[str] = Counter()

    def record_activity(self, activity_type: str) -> None:
        """Reset the idle timer.

        Args:
            activity_type: One of :data:`ACTIVITY_TYPES`.

        Raises:
            ValueError: ``activity_type`` is not a known activity.
        """
        _check_type(activity_type)
        with self._lock:
            self._touch(activity_type)

    def begin(self, activity_type: str) -> None:
        """Mark the start of work that may outlast ``max_idle`` (an API call, a dispatch).

        Until the matching :meth:`end`, :meth:`is_idle` is False. Calls nest and count.

        Raises:
            ValueError: ``activity_type`` is not a known activity.
        """
        _check_type(activity_type)
        with self._lock:
            self._touch(activity_type)
            self._in_progress[activity_type] += 1

    def end(self, activity_type: str) -> None:
        """Mark the end of work started by :meth:`begin`; the end counts as activity.

        Raises:
            ValueError: ``activity_type`` is unknown or has no unmatched :meth:`begin`.
        """
        _check_type(activity_type)
        with self._lock:
            if self._in_progress[activity_type] == 0:
                raise ValueError(f"end({activity_type!r}) without a matching begin()")
            self._in_progress[activity_type] -= 1
            self._touch(activity_type)

    @contextmanager
    def active(self, activity_type: str) -> Iterator[None]:
        """``begin``/``end`` around a block, also when the block raises."""
        self.begin(activity_type)
        try:
            yield
        finally:
            self.end(activity_type)

    @property
    def in_progress(self) -> int:
        """How many begun activities have not ended yet."""
        with self._lock:
            return sum(self._in_progress.values())

    @property
    def last_activity_type(self) -> str | None:
        """The type of the most recent activity, or None before the first one."""
        with self._lock:
            return self._last_type

    def idle_seconds(self) -> float:
        """Seconds since the last recorded activity; 0.0 while work is in progress."""
        with self._lock:
            return self._idle_s(self._clock())

    def is_idle(self, max_idle: float) -> bool:
        """True only when nothing happened for ``max_idle`` seconds and nothing is running.

        Also False within :data:`STATE_TRANSITION_GRACE_S` of a state transition.

        Args:
            max_idle: Seconds without activity that count as idle.

        Raises:
            ValueError: ``max_idle`` is negative.
        """
        if max_idle < 0:
            raise ValueError(f"max_idle must be >= 0 seconds, got {max_idle}")
        with self._lock:
            now_s = self._clock()
            since_transition_s = (
                None if self._last_transition_s is None else now_s - self._last_transition_s
            )
            if since_transition_s is not None and since_transition_s < STATE_TRANSITION_GRACE_S:
                return False
            if any(self._in_progress.values()):
                return False
            return self._idle_s(now_s) >= max_idle

    def _touch(self, activity_type: str) -> None:
        now_s = self._clock()
        self._last_activity_s = now_s
        self._last_type = activity_type
        if activity_type == "state_transition":
            self._last_transition_s = now_s

    def _idle_s(self, now_s: float) -> float:
        if any(self._in_progress.values()):
            return 0.0
        # max(): an injected clock that steps back must not report negative idleness.
        return max(0.0, now_s - self._last_activity_s)


def _check_type(activity_type: str) -> None:
    if activity_type not in ACTIVITY_TYPES:
        raise ValueError(
            f"unknown activity type {activity_type!r}; expected one of "
            + ", ".join(sorted(ACTIVITY_TYPES))
        )
