"""Packs: which short attempts the scheduler sends together, and how their messages
name them (``scheduler.executors.packing``; the worker's side and real runs are in
``tests/integration/test_packs.py``)."""

from __future__ import annotations

import json

import fakeredis
import pytest

from pact_workers.errors import InputError
from pact_workers.fleet.heartbeats import heartbeat_worker
from pact_workers.models.work import Phase, TaskMessage
from scheduler.executors.celery import CeleryFleet, task_id
from scheduler.executors.messages import queued_task_ids, taken_task_ids
from scheduler.executors.packing import (
    MAX_PACK,
    PACK_BELOW_S,
    PACK_HEADER,
    SLOTS_EVERY_S,
    Packer,
    fleet_slots,
    max_pack_from_env,
    message_of,
)

CONTRACT = "contract_author"
TEST = "test_author"


def attempt(i: int, phase: Phase = Phase.CONTRACT, run_id: str = "r1") -> TaskMessage:
    return TaskMessage(run_id=run_id, component_id=f"c{i}", phase=phase, attempt=1)


def packer(slots: dict[str, int], **options: object) -> Packer:
    return Packer(lambda: slots, **options)  # type: ignore[arg-type]


def names(messages: list[list[TaskMessage]]) -> list[list[str]]:
    return [[t.component_id for t in m] for m in messages]


def test_nothing_is_packed_before_a_role_has_reported_a_duration() -> None:
    p = packer({CONTRACT: 1})
    batch = [attempt(i) for i in range(6)]
    assert names(p.packs(batch, {CONTRACT: 10})) == [[f"c{i}"] for i in range(6)]
    assert p.packs_sent == 0


def test_short_attempts_beyond_the_fleets_slots_go_in_packs_of_in_flight_over_slots() -> None:
    p = packer({CONTRACT: 4})
    p.observe(CONTRACT, 0.01)
    # 12 in flight before, 4 now: 16 on 4 slots, so packs of 4.
    assert names(p.packs([attempt(i) for i in range(4)], {CONTRACT: 12})) == [
        ["c0", "c1", "c2", "c3"]
    ]
    # 5 in flight before, 3 now: 8 on 4 slots, packs of 2 (the last alone).
    assert names(p.packs([attempt(i) for i in range(3)], {CONTRACT: 5})) == [["c0", "c2"], ["c1"]]
    assert (p.packs_sent, p.packed_attempts) == (2, 6)


def test_the_most_urgent_attempts_of_a_flush_head_the_packs() -> None:
    p = packer({CONTRACT: 2})
    p.observe(CONTRACT, 0.01)
    # 8 in flight on 2 slots: packs of 4; the batch comes critical path first, and
    # the first two (the most urgent) start at once, one in each pack.
    assert names(p.packs([attempt(i) for i in range(8)], {})) == [
        ["c0", "c2", "c4", "c6"],
        ["c1", "c3", "c5", "c7"],
    ]


def test_no_pack_is_larger_than_max_pack() -> None:
    p = packer({CONTRACT: 1})
    p.observe(CONTRACT, 0.01)
    # 20 in flight on one slot: packs of at most MAX_PACK, so three, dealt evenly.
    sizes = [len(m) for m in p.packs([attempt(i) for i in range(20)], {})]
    assert sizes == [7, 7, 6]
    assert max(sizes) <= MAX_PACK < 20
    small = packer({CONTRACT: 1}, max_pack=3)
    small.observe(CONTRACT, 0.01)
    assert [len(m) for m in small.packs([attempt(i) for i in range(7)], {})] == [3, 2, 2]


def test_max_pack_one_sends_every_attempt_alone() -> None:
    p = packer({CONTRACT: 1}, max_pack=1)
    p.observe(CONTRACT, 0.01)
    assert [len(m) for m in p.packs([attempt(i) for i in range(5)], {CONTRACT: 5})] == [1] * 5
    with pytest.raises(ValueError, match="max_pack"):
        packer({}, max_pack=0)


@pytest.mark.parametrize(
    ("slots", "duration_s", "in_flight"),
    [
        pytest.param({CONTRACT: 4}, PACK_BELOW_S * 2, 20, id="attempts-not-short"),
        pytest.param({CONTRACT: 8}, 0.01, 0, id="a-free-slot-for-each"),
        pytest.param({TEST: 4}, 0.01, 20, id="no-worker-serves-the-role"),
        pytest.param({}, 0.01, 20, id="no-live-worker"),
    ],
)
def test_no_pack_where_it_would_cost_parallelism_or_save_little(
    slots: dict[str, int], duration_s: float, in_flight: int
) -> None:
    p = packer(slots)
    p.observe(CONTRACT, duration_s)
    batch = [attempt(i) for i in range(8)]
    assert [len(m) for m in p.packs(batch, {CONTRACT: in_flight})] == [1] * 8


def test_a_role_whose_attempts_turn_slow_stops_being_packed() -> None:
    p = packer({CONTRACT: 1})
    p.observe(CONTRACT, 0.05)
    assert p.size(CONTRACT, 4) == 4
    for _ in range(3):
        p.observe(CONTRACT, 5.0)  # a few slow attempts move the average past the bound
    assert p.mean_s[CONTRACT] > PACK_BELOW_S
    assert p.size(CONTRACT, 4) == 1


def test_roles_are_packed_apart_each_on_its_own_slots() -> None:
    p = packer({CONTRACT: 1, TEST: 2})
    p.observe(CONTRACT, 0.01)
    p.observe(TEST, 0.01)
    batch = [attempt(i, phase) for i in range(4) for phase in (Phase.CONTRACT, Phase.TEST)]
    messages = p.packs(batch, {})
    assert {(m[0].phase, len(m)) for m in messages} == {(Phase.CONTRACT, 4), (Phase.TEST, 2)}
    assert all(len({t.phase for t in m}) == 1 for m in messages)
    assert sorted(len(m) for m in messages) == [2, 2, 4]


def test_the_fleets_slots_are_read_again_only_after_a_while() -> None:
    reads: list[int] = []
    now = [0.0]

    def slots() -> dict[str, int]:
        reads.append(1)
        return {CONTRACT: 2}

    p = Packer(slots, clock=lambda: now[0])
    p.observe(CONTRACT, 0.01)
    for _ in range(5):
        p.size(CONTRACT, 8)
    assert len(reads) == 1
    now[0] += SLOTS_EVERY_S
    p.size(CONTRACT, 8)
    assert len(reads) == 2


def test_fleet_slots_add_up_the_live_workers_concurrency_per_role() -> None:
    client = fakeredis.FakeRedis()
    heartbeat_worker(client, "w1", {"roles": [CONTRACT, TEST], "concurrency": 4}, ttl_s=60)
    heartbeat_worker(client, "w2", {"roles": [CONTRACT], "concurrency": 2}, ttl_s=60)
    heartbeat_worker(client, "w3", {"roles": [TEST], "concurrency": None}, ttl_s=60)
    assert fleet_slots(client) == {CONTRACT: 6, TEST: 4}


def test_a_packs_message_names_its_members_and_a_lone_attempts_is_unchanged() -> None:
    single_args, single = message_of([attempt(0)], task_id)
    assert single_args == [attempt(0).model_dump(mode="json")]
    assert single["task_id"] == task_id(attempt(0))
    assert PACK_HEADER not in single.get("headers", {})
    pack = [attempt(i) for i in range(3)]
    args, options = message_of(pack, task_id)
    assert args == [[t.model_dump(mode="json") for t in pack]]
    assert options["headers"] == {PACK_HEADER: [task_id(t) for t in pack]}
    # The pack's own id is none of its members': revoking a member (a cancel) must
    # not revoke the others with it.
    assert options["task_id"] not in options["headers"][PACK_HEADER]
    assert options["argsrepr"] == "pack of 3: run=r1 c0/contract#1 c1/contract#1 c2/contract#1"
    _, mixed = message_of([attempt(0), attempt(1, run_id="r2")], task_id)
    assert mixed["argsrepr"] == "pack of 2: run=r1,r2 c0/contract#1 c1/contract#1"


def _on_broker(options: dict[str, object]) -> bytes:
    """A message as kombu's Redis transport keeps it, with ``options``' headers."""
    headers = {"id": options["task_id"], **options.get("headers", {})}  # type: ignore[dict-item]
    return json.dumps({"headers": headers, "body": ""}).encode()


def test_a_packs_members_are_found_on_their_queue_and_among_the_taken() -> None:
    client = fakeredis.FakeRedis()
    pack = [attempt(i) for i in range(3)]
    _, options = message_of(pack, task_id)
    client.lpush("pact.contract_author", _on_broker(options))
    found = queued_task_ids(client, ["pact.contract_author"])["pact.contract_author"]
    assert found is not None
    assert {task_id(t) for t in pack} <= found
    client.delete("pact.contract_author")
    client.hset("unacked", "tag1", json.dumps([json.loads(_on_broker(options)), "", ""]))
    assert {task_id(t) for t in pack} <= taken_task_ids(client)


def test_pact_max_pack_sets_the_fleets_largest_pack(monkeypatch: pytest.MonkeyPatch) -> None:
    assert max_pack_from_env({}) == MAX_PACK
    assert max_pack_from_env({"PACT_MAX_PACK": " 3 "}) == 3
    for bad in ("0", "x", "2.5"):
        with pytest.raises(InputError, match=rf"PACT_MAX_PACK='{bad}'.*at least 1"):
            max_pack_from_env({"PACT_MAX_PACK": bad})
    # What `pact run --executor celery` and `pact scheduler` build reads it (no
    # connection is made until the fleet is used).
    monkeypatch.setenv("PACT_MAX_PACK", "1")
    assert CeleryFleet("redis://127.0.0.1:1/0").packer.max_pack == 1
    assert CeleryFleet("redis://127.0.0.1:1/0", max_pack=5).packer.max_pack == 5
    monkeypatch.delenv("PACT_MAX_PACK")
    assert CeleryFleet("redis://127.0.0.1:1/0").packer.max_pack == MAX_PACK
