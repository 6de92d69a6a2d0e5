"""The run picture: attempts as bars on worker lanes, the critical path, the bound."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from pact_workers.models.work import ErrorClass, Phase
from scheduler.events import (
    Event,
    ItemDispatched,
    ItemFailed,
    ItemSucceeded,
    ResultDropped,
    RunStarted,
)
from scheduler.policy import WORKER_LOST
from scheduler.timeline import NO_REPORT, collect_bars, longest_chain, picture, write_picture
from scheduler.wavefront import WorkGraph
from tests.runs import star_tree

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def at(seconds: float) -> str:
    return (T0 + timedelta(seconds=seconds)).isoformat()


def dispatched(cid: str, phase: Phase, attempt: int, t: float) -> ItemDispatched:
    return ItemDispatched(component_id=cid, phase=phase, attempt=attempt, role="r", ts=at(t))


def succeeded(cid: str, phase: Phase, attempt: int, t: float, worker: str) -> ItemSucceeded:
    return ItemSucceeded(
        component_id=cid, phase=phase, attempt=attempt, output="d", worker=worker, ts=at(t)
    )


def events_with_a_lost_worker() -> list[Event]:
    """c1 and c2 (leaves of root): c2's implementation is lost with its worker, then
    re-dispatched to another; the lost worker's late result is dropped."""
    tree = star_tree(2).model_dump(mode="json")
    out: list[Event] = [RunStarted(run_id="r1", tree=tree, ts=at(0))]
    for cid, worker in (("c1", "h/a"), ("c2", "h/b")):
        out += [
            dispatched(cid, Phase.CONTRACT, 1, 0),
            succeeded(cid, Phase.CONTRACT, 1, 1, worker),
            dispatched(cid, Phase.TEST, 1, 1),
            succeeded(cid, Phase.TEST, 1, 2, worker),
        ]
    out += [
        dispatched("c1", Phase.IMPLEMENT, 1, 2),
        succeeded("c1", Phase.IMPLEMENT, 1, 4, "h/a"),
        dispatched("c2", Phase.IMPLEMENT, 1, 2),
        ItemFailed(
            component_id="c2",
            phase=Phase.IMPLEMENT,
            attempt=1,
            error_class=ErrorClass.TRANSIENT,
            error_type=WORKER_LOST,
            decision="retry",
            ts=at(5),
        ),
        dispatched("c2", Phase.IMPLEMENT, 2, 5),
        succeeded("c2", Phase.IMPLEMENT, 2, 8, "h/a"),
        dispatched("root", Phase.CONTRACT, 1, 0),
        succeeded("root", Phase.CONTRACT, 1, 1, "h/c"),
        dispatched("root", Phase.TEST, 1, 1),
        succeeded("root", Phase.TEST, 1, 2, "h/c"),
        dispatched("root", Phase.INTEGRATE, 1, 8),
        succeeded("root", Phase.INTEGRATE, 1, 9, "h/c"),
    ]
    return out


def test_a_lost_attempt_and_its_re_dispatch_are_two_bars() -> None:
    run_id, bars = collect_bars(events_with_a_lost_worker())
    assert run_id == "r1" and len(bars) == 10
    c2 = [b for b in bars if b.key == ("c2", Phase.IMPLEMENT)]
    assert [(b.attempt, b.outcome, b.lane, b.start_s, b.end_s) for b in c2] == [
        (1, "lost", NO_REPORT, 2.0, 5.0),
        (2, "succeeded", "h/a", 5.0, 8.0),
    ]


def test_the_bars_come_from_one_pass_over_the_events() -> None:
    """`pact timeline` reads the log one line at a time: a one-pass iterator gives the
    bars the list gives."""
    events = events_with_a_lost_worker()
    assert collect_bars(iter(events)) == collect_bars(events)


def test_a_late_result_of_a_lost_attempt_shows_as_dropped_on_its_worker() -> None:
    events = events_with_a_lost_worker()
    events.append(
        ResultDropped(
            component_id="c2",
            phase=Phase.IMPLEMENT,
            attempt=1,
            reason="attempt 1 is not the current attempt",
            worker="h/b",
            ts=at(6),
        )
    )
    _, bars = collect_bars(events)
    lost = next(b for b in bars if b.bar_id == "bar-c2-implement-1")
    assert (lost.outcome, lost.lane) == ("dropped", "h/b")


def test_attempts_without_a_result_are_running_until_the_last_event() -> None:
    events = events_with_a_lost_worker()[:-1]  # the root's integration never reported
    _, bars = collect_bars(events)
    last = bars[-1]
    assert (last.bar_id, last.outcome, last.end_s) == ("bar-root-integrate-1", "running", 8.0)
    assert collect_bars([]) == ("", [])


def test_the_critical_path_and_the_lower_bound() -> None:
    events = events_with_a_lost_worker()
    run_id, bars = collect_bars(events)
    pic = picture(run_id, bars, star_tree(2), None)
    # Accepted work: contracts and tests 1 s each (6 s), c1 2 s, c2 3 s, root 1 s.
    assert pic.work_s == pytest.approx(12.0)
    assert pic.critical_path_s == pytest.approx(6.0)  # c2 contract, test, implement, root
    assert pic.slots == 3 and pic.lanes == ["h/a", "h/b", "h/c", NO_REPORT]
    assert pic.lower_bound_s == pytest.approx(6.0)
    assert pic.makespan_s == pytest.approx(9.0) and pic.ratio == pytest.approx(1.5)
    critical = {b.bar_id for b in pic.bars if b.critical}
    assert critical == {
        "bar-c2-contract-1",
        "bar-c2-test-1",
        "bar-c2-implement-2",
        "bar-root-integrate-1",
    }
    assert "makespan 9.00s against a lower bound of 6.00s" in pic.summary()


def test_the_longest_chain_follows_durations_not_names() -> None:
    graph = WorkGraph(star_tree(2))
    durations = {("c1", Phase.IMPLEMENT): 10.0, ("c2", Phase.IMPLEMENT): 1.0}
    length, chain = longest_chain(graph, durations)
    assert length == 10.0
    assert ("c1", Phase.IMPLEMENT) in chain and ("c2", Phase.IMPLEMENT) not in chain
    assert chain[-1] == ("root", Phase.INTEGRATE)


def test_pictures_in_each_format(tmp_path: Path) -> None:
    run_id, bars = collect_bars(events_with_a_lost_worker())
    pic = picture(run_id, bars, star_tree(2), None)
    for name in ("run.svg", "run.png", "run.html"):
        write_picture(pic, tmp_path / name)
    svg = (tmp_path / "run.svg").read_text()
    assert all(f'id="{b.bar_id}"' in svg for b in bars)
    assert (tmp_path / "run.png").read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    page = (tmp_path / "run.html").read_text()
    assert page.count('data-bar="bar-') == len(bars) and "<svg" in page
    with pytest.raises(ValueError, match="unknown picture format"):
        write_picture(pic, tmp_path / "run.pdf")
