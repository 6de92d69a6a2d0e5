"""The pure parts of scheduler services sharing the load: how many runs a service takes
on per loop, fair dispatch in turns within the granted slots, and lease values."""

from __future__ import annotations

import fakeredis
import pytest

from pact_workers.models.work import Phase
from scheduler.fairness import Turn, dispatch_in_turns
from scheduler.intake import TAKE_PER_STEP, room_for_runs
from scheduler.ownership import Holder, RunLeases, parse_holder


def test_alone_a_service_takes_up_to_a_batch_of_runs_per_loop() -> None:
    assert room_for_runs(0, 64, {}) == TAKE_PER_STEP
    assert room_for_runs(60, 64, {}) == 4
    assert room_for_runs(64, 64, {}) == 0


def test_a_service_ahead_of_another_takes_one_run_per_loop_and_one_behind_catches_up() -> None:
    assert room_for_runs(5, 64, {"b": 2, "c": 9}) == 1
    assert room_for_runs(5, 64, {"b": 5}) == 1
    assert room_for_runs(2, 64, {"b": 7}) == 6
    assert room_for_runs(0, 64, {"b": 30}) == TAKE_PER_STEP
    assert room_for_runs(3, 4, {"b": 30}) == 1
    assert room_for_runs(4, 4, {"b": 30}) == 0


def turn(share: int, ready: list[tuple[str, Phase]], log: list[str], name: str) -> Turn:
    return Turn(share, list(ready), lambda cid, phase: log.append(f"{name}:{cid}"))


def test_runs_dispatch_in_turns_by_priority_within_the_granted_slots() -> None:
    log: list[str] = []
    high = turn(3, [(f"h{i}", Phase.IMPLEMENT) for i in range(5)], log, "high")
    low = turn(1, [(f"l{i}", Phase.IMPLEMENT) for i in range(5)], log, "low")
    slots = {"code_author": 6}
    assert dispatch_in_turns([high, low], slots) == 6
    assert log == ["high:h0", "high:h1", "high:h2", "low:l0", "high:h3", "high:h4"]
    assert slots == {"code_author": 0}


def test_an_item_of_a_full_role_is_skipped_and_the_next_of_another_role_goes() -> None:
    log: list[str] = []
    run = turn(2, [("a", Phase.IMPLEMENT), ("b", Phase.CONTRACT), ("c", Phase.TEST)], log, "r")
    slots = {"code_author": 0, "contract_author": 1, "test_author": 1}
    assert dispatch_in_turns([run], slots) == 2
    assert log == ["r:b", "r:c"]
    assert dispatch_in_turns([turn(1, [], log, "idle")], {"code_author": 3}) == 0


@pytest.mark.parametrize(
    ("raw", "holder"),
    [
        (b"12 host:41:abc123", Holder(12, "host:41:abc123")),
        ("3 h:1:x", Holder(3, "h:1:x")),
        (None, None),
        (b"", None),
        (b"twelve host:1:x", None),
        (b"12", None),
        (b"12 ", None),
    ],
)
def test_a_lease_value_names_its_token_and_holder(
    raw: bytes | str | None, holder: Holder | None
) -> None:
    assert parse_holder(raw) == holder


@pytest.mark.parametrize("scheduler_id", ["", "two words"])
def test_a_scheduler_id_is_one_word(scheduler_id: str) -> None:
    with pytest.raises(ValueError, match="scheduler id"):
        RunLeases(fakeredis.FakeRedis(), scheduler_id, 10.0)
