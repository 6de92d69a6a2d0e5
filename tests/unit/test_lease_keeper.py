"""The lease keeper: one thread renews every lease a process holds, each on its turn."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest

from pact_workers.fleet.keeper import LeaseKeeper

pytestmark = pytest.mark.timeout(60)


class Counted:
    """A lease that counts its renewals; ``answer`` decides what each returns."""

    def __init__(self, answer: Callable[[int], bool] = lambda n: True) -> None:
        self.renewals = 0
        self.answer = answer
        self.lock = threading.Lock()

    def renew(self) -> bool:
        with self.lock:
            self.renewals += 1
            n = self.renewals
        return self.answer(n)


class Broken:
    def __init__(self) -> None:
        self.calls = 0

    def renew(self) -> bool:
        self.calls += 1
        raise RuntimeError("a bug in one renewal")


def until(check: Callable[[], bool], timeout_s: float = 5.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, f"not true within {timeout_s} s"
        time.sleep(0.01)


def keeper_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "leases"]


def test_one_thread_renews_every_kept_lease_each_interval() -> None:
    before = len(keeper_threads())
    keeper = LeaseKeeper(0.05, give_up_s=1.0)
    leases = [Counted() for _ in range(5)]
    for lease in leases:
        keeper.add(lease)

    time.sleep(0.5)  # 10 intervals

    assert len(keeper_threads()) == before + 1
    assert keeper.kept() == 5
    for lease in leases:
        assert 5 <= lease.renewals <= 12, lease.renewals
    for lease in leases:
        keeper.remove(lease)
    assert keeper.kept() == 0


def test_a_removed_lease_is_never_renewed_again() -> None:
    keeper = LeaseKeeper(0.02, give_up_s=1.0)
    lease = Counted()
    keeper.add(lease)
    until(lambda: lease.renewals >= 2)

    keeper.remove(lease)
    seen = lease.renewals
    time.sleep(0.2)

    assert lease.renewals == seen


def test_remove_waits_for_a_renewal_in_progress() -> None:
    started, finish = threading.Event(), threading.Event()

    def slow(n: int) -> bool:
        started.set()
        finish.wait(5)
        return True

    keeper = LeaseKeeper(0.01, give_up_s=5.0)
    lease = Counted(slow)
    keeper.add(lease)
    assert started.wait(5)
    removed = threading.Event()
    remover = threading.Thread(target=lambda: (keeper.remove(lease), removed.set()))
    remover.start()

    time.sleep(0.2)
    assert not removed.is_set()  # the renewal is still running: its lease may be written

    finish.set()
    remover.join(5)
    assert removed.is_set()
    assert keeper.kept() == 0


def test_soon_brings_a_renewal_forward_and_nothing_else() -> None:
    keeper = LeaseKeeper(30.0, give_up_s=1.0)
    marked, other = Counted(), Counted()
    keeper.add(marked)
    keeper.add(other)

    keeper.soon(marked, 0.05)
    until(lambda: marked.renewals == 1)
    time.sleep(0.2)

    assert (marked.renewals, other.renewals) == (1, 0)
    keeper.soon(Counted(), 0.0)  # a lease it does not keep: nothing happens
    assert keeper.kept() == 2
    keeper.remove(marked)
    keeper.remove(other)


def test_a_lease_that_says_stop_is_dropped_and_the_others_go_on() -> None:
    keeper = LeaseKeeper(0.02, give_up_s=1.0)
    superseded = Counted(lambda n: n < 2)
    kept = Counted()
    keeper.add(superseded)
    keeper.add(kept)

    until(lambda: kept.renewals >= 6)

    assert superseded.renewals == 2
    assert keeper.kept() == 1
    keeper.remove(kept)


def test_a_renewal_that_raises_does_not_stop_the_others() -> None:
    keeper = LeaseKeeper(0.02, give_up_s=1.0)
    broken, fine = Broken(), Counted()
    keeper.add(broken)
    keeper.add(fine)

    until(lambda: fine.renewals >= 5 and broken.calls >= 5)

    assert keeper.kept() == 2
    keeper.remove(broken)
    keeper.remove(fine)
