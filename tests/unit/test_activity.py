"""Idle detection that only counts genuine idleness (seed 000, 1.3)."""

from __future__ import annotations

import threading

import pytest

from scheduler.activity import STATE_TRANSITION_GRACE_S, ActivityTracker


class FakeClock:
    """A monotonic clock that only moves when told to."""

    def __init__(self, start_s: float = 1_000.0) -> None:
        self.now_s = start_s

    def __call__(self) -> float:
        return self.now_s

    def advance(self, seconds: float) -> None:
        self.now_s += seconds


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def tracker(clock: FakeClock) -> ActivityTracker:
    return ActivityTracker(clock=clock)


def test_api_call_resets_idle(tracker: ActivityTracker, clock: FakeClock) -> None:
    clock.advance(250)
    assert tracker.idle_seconds() == 250
    tracker.record_activity("api_call")
    assert tracker.idle_seconds() == 0.0
    assert tracker.last_activity_type == "api_call"


def test_state_transition_resets_idle(tracker: ActivityTracker, clock: FakeClock) -> None:
    clock.advance(250)
    tracker.record_activity("state_transition")
    assert tracker.idle_seconds() == 0.0
    assert tracker.last_activity_type == "state_transition"


def test_genuinely_idle_triggers(tracker: ActivityTracker, clock: FakeClock) -> None:
    tracker.record_activity("fifo_signal")
    clock.advance(599.9)
    assert not tracker.is_idle(600)
    clock.advance(0.1)
    assert tracker.is_idle(600)


def test_active_work_prevents_timeout(tracker: ActivityTracker, clock: FakeClock) -> None:
    max_idle_s = 600
    # Three hours of API calls, one every four minutes: checked every minute, never idle.
    for minute in range(3 * 60):
        if minute % 4 == 0:
            tracker.record_activity("api_call")
        assert not tracker.is_idle(max_idle_s), f"idle at minute {minute}"
        clock.advance(60)
    # One call that outlasts max_idle many times over is work in progress, not idleness.
    with tracker.active("api_call"):
        for _ in range(120):
            clock.advance(60)
            assert not tracker.is_idle(max_idle_s)
            assert tracker.idle_seconds() == 0.0
    # Once it returns, the idle timer starts from its end.
    clock.advance(max_idle_s - 1)
    assert not tracker.is_idle(max_idle_s)
    clock.advance(1)
    assert tracker.is_idle(max_idle_s)


def test_a_new_tracker_counts_idleness_from_its_creation(
    tracker: ActivityTracker, clock: FakeClock
) -> None:
    assert tracker.last_activity_type is None
    assert tracker.idle_seconds() == 0.0
    clock.advance(30)
    assert tracker.idle_seconds() == 30


def test_every_activity_type_resets_the_timer(tracker: ActivityTracker, clock: FakeClock) -> None:
    for activity_type in ("api_call", "audit_entry", "fifo_signal", "heartbeat", "dispatch"):
        clock.advance(1_000)
        tracker.record_activity(activity_type)
        assert tracker.idle_seconds() == 0.0


def test_never_idle_within_the_grace_period_after_a_state_transition(
    tracker: ActivityTracker, clock: FakeClock
) -> None:
    tracker.record_activity("state_transition")
    clock.advance(STATE_TRANSITION_GRACE_S - 1)
    assert not tracker.is_idle(10)
    clock.advance(1)
    assert tracker.is_idle(10)


def test_an_unfinished_call_keeps_the_tracker_busy_until_every_call_ends(
    tracker: ActivityTracker, clock: FakeClock
) -> None:
    tracker.begin("api_call")
    tracker.begin("dispatch")
    assert tracker.in_progress == 2
    tracker.end("api_call")
    clock.advance(10_000)
    assert not tracker.is_idle(600)
    tracker.end("dispatch")
    assert tracker.in_progress == 0
    clock.advance(600)
    assert tracker.is_idle(600)


def test_active_ends_the_call_when_the_block_raises(tracker: ActivityTracker) -> None:
    with pytest.raises(RuntimeError), tracker.active("api_call"):
        raise RuntimeError("the provider hung up")
    assert tracker.in_progress == 0


def test_is_idle_at_zero_means_nothing_is_running(
    tracker: ActivityTracker, clock: FakeClock
) -> None:
    assert tracker.is_idle(0)
    with tracker.active("api_call"):
        assert not tracker.is_idle(0)


def test_a_clock_that_steps_back_never_gives_negative_idleness(
    tracker: ActivityTracker, clock: FakeClock
) -> None:
    clock.advance(-5)
    assert tracker.idle_seconds() == 0.0


def test_an_unknown_activity_type_is_rejected(tracker: ActivityTracker) -> None:
    with pytest.raises(ValueError, match="unknown activity type 'coffee'"):
        tracker.record_activity("coffee")
    with pytest.raises(ValueError, match="unknown activity type"):
        tracker.begin("coffee")


def test_end_without_begin_is_rejected(tracker: ActivityTracker) -> None:
    with pytest.raises(ValueError, match="without a matching begin"):
        tracker.end("api_call")


def test_a_negative_max_idle_is_rejected(tracker: ActivityTracker) -> None:
    with pytest.raises(ValueError, match="max_idle"):
        tracker.is_idle(-1)


def test_concurrent_calls_from_many_threads_balance(tracker: ActivityTracker) -> None:
    def work() -> None:
        for _ in range(500):
            with tracker.active("api_call"):
                tracker.record_activity("audit_entry")

    threads = [threading.Thread(target=work) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert tracker.in_progress == 0


def test_the_default_clock_is_monotonic_time() -> None:
    tracker = ActivityTracker()
    assert 0.0 <= tracker.idle_seconds() < 5.0
    assert not tracker.is_idle(60)
