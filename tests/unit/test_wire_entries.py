"""Entries anyone who can write to the fleet's Redis can leave, read at the edge: a
submission or a result that is not one is dropped (and acknowledged) when it is read,
and a key of the wrong type is deleted, never read for ever. fakeredis: no Lua here
(the lease scripts are tried in tests/integration/test_wire_inputs.py)."""

from __future__ import annotations

import json
from pathlib import Path

import fakeredis
import pytest

from pact_workers.fleet import keys
from pact_workers.fleet.results import ResultStream
from scheduler.gates.fleet import take_review_requests
from scheduler.registry import SubmissionQueue


def submission(example: Path, **fields: object) -> dict[str, str]:
    doc = {
        "run_id": "a1b2c3",
        "name": "tree.json",
        "tree_text": (example / "tree.json").read_text(),
        "submitted_at": "2026-01-01T00:00:00+00:00",
        **fields,
    }
    return {"submission": json.dumps(doc)}


@pytest.mark.parametrize(
    "fields",
    [
        {"run_id": "../escaped"},
        {"run_id": ""},
        {"run_id": "ab:cd"},
        {"run_id": "a/b"},
        {"run_id": "a" * 65},
        {"tree_suffix": "/../../x.json"},
        {"tree_suffix": ".js\x00on"},
        {"name": "n" * 10_000},
    ],
)
def test_a_submission_whose_fields_would_leave_the_runs_directory_or_break_keys_is_dropped(
    fake: fakeredis.FakeRedis, example: Path, fields: dict[str, str]
) -> None:
    queue = SubmissionQueue(fake, "s1", claim_idle_s=10)
    fake.xadd(keys.SUBMISSIONS, submission(example, **fields))
    fake.xadd(keys.SUBMISSIONS, submission(example, run_id="good1"))
    taken = queue.take(10)
    assert [sub.run_id if sub else None for _, sub in taken] == [None, "good1"]


def test_a_submission_of_a_yaml_tree_keeps_its_suffix(
    fake: fakeredis.FakeRedis, example: Path
) -> None:
    queue = SubmissionQueue(fake, "s1", claim_idle_s=10)
    fake.xadd(keys.SUBMISSIONS, submission(example, tree_suffix=".yaml"))
    (_, sub), *_ = queue.take(1)
    assert sub is not None and sub.tree_suffix == ".yaml"


@pytest.mark.parametrize(
    "extra",
    [
        # Logged as null (JSON has no infinity), it would make the run's log unreadable.
        '"usage": {"cost_usd": 1e400}',
        '"duration_s": 1e400',
        # Finite, but two such costs (or durations) add up to infinity in the run's totals
        # (and its phase means), which no log, snapshot or priority can hold.
        '"usage": {"cost_usd": 1.7e308}',
        '"duration_s": 1.7e308',
        '"usage": {"input_tokens": 1' + "0" * 400 + "}",
    ],
    ids=["infinite-cost", "infinite-duration", "huge-cost", "huge-duration", "huge-tokens"],
)
def test_a_result_with_an_infinite_cost_or_duration_is_dropped_as_malformed(
    fake: fakeredis.FakeRedis, extra: str
) -> None:
    doc: dict[str, object] = {
        "run_id": "r1",
        "component_id": "tokens",
        "phase": "contract",
        "attempt": 1,
        "outcome": "error",
    }
    text = json.dumps(doc)[:-1] + f", {extra}}}"
    stream = ResultStream(fake, keys.run_results("r1"))
    stream.ensure_group()
    fake.xadd(keys.run_results("r1"), {"result": text})
    assert stream.read(block_ms=0) == []
    assert stream.malformed == 1
    assert fake.xpending(keys.run_results("r1"), keys.RESULTS_GROUP)["pending"] == 0


def test_a_review_key_of_the_wrong_type_is_deleted_and_holds_no_decision(
    fake: fakeredis.FakeRedis,
) -> None:
    fake.set(keys.review_requests("r1"), "not a list")
    assert take_review_requests(fake, "r1") == []
    assert not fake.exists(keys.review_requests("r1"))
    assert take_review_requests(fake, "r1") == []


def test_a_results_overlong_texts_are_cut_and_the_result_is_kept() -> None:
    """An error of megabytes would become one line of the audit log of that size; the
    result stays (its outcome matters), its texts are cut, saying so."""
    from pact_workers.models.work import MAX_TEXT_CHARS, ResultMessage

    result = ResultMessage.model_validate(
        {
            "run_id": "r1",
            "component_id": "tokens",
            "phase": "contract",
            "attempt": 1,
            "outcome": "error",
            "error": "e" * (10 << 20),
            "worker": "w" * 100_000,
        }
    )
    assert len(result.error) <= MAX_TEXT_CHARS + 100 and result.error.startswith("eee")
    assert "characters cut" in result.error
    assert len(result.worker) <= MAX_TEXT_CHARS + 100
