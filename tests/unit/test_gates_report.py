"""What ``pact status`` shows of the gates (``scheduler.gates.report``)."""

from __future__ import annotations

from pact_workers.models.work import Phase
from scheduler.cli.views import MAX_ROWS
from scheduler.gates.dimensions import Dimensions, GateRecord
from scheduler.gates.item import open_gates
from scheduler.gates.report import gate_lines
from scheduler.gates.scorer import gates_for_score
from scheduler.gates.transitions import gate_dispatched
from scheduler.state import ItemState, RunState, item_key


def record_for(novelty: int, scope: int, uncertainty: int, risk: int) -> GateRecord:
    dims = Dimensions(novelty=novelty, scope=scope, uncertainty=uncertainty, risk=risk)
    return GateRecord(
        dimensions=dims, score=dims.score, gates=gates_for_score(dims.score), mode="advisory"
    )


def gated_run(records: list[GateRecord]) -> RunState:
    state = RunState(run_id="r")
    for i, record in enumerate(records):
        item = ItemState(component_id=f"c{i}", phase=Phase.IMPLEMENT)
        gate_dispatched(item, record, "work")
        if record.gates.teachback_mode == "blocking":
            open_gates(item).would_have_blocked = True
        state.items[item_key(item.component_id, item.phase)] = item
    return state


def test_pact_status_shows_the_count_of_what_would_have_blocked_before_the_items() -> None:
    """`pact status` shows a few hundred lines of a large run's gates: the count the
    team looks at before it flips the flag comes first, so it is never cut off."""
    state = gated_run([record_for(2, 1, 1, 3)] * (MAX_ROWS + 5))
    lines = gate_lines(state)
    assert lines[0].startswith(f"{MAX_ROWS + 5} work call(s) would have blocked (advisory)")
    assert len(lines) == MAX_ROWS + 7 and lines[2].startswith("c0/implement: score 7")


def test_pact_status_totals_the_scored_items_by_route_before_the_items() -> None:
    """A large run's gates read as totals: how many items each workflow route took, and
    how many a blocking teachback or an auditor gates; then the items."""
    low, mid, high = record_for(1, 1, 2, 1), record_for(2, 2, 2, 2), record_for(3, 3, 3, 3)
    state = gated_run([low, mid, high, mid, low, low])
    lines = gate_lines(state)
    assert lines[1] == (
        "6 implement/integrate item(s) scored: 3 comPACT, 2 orchestrate, 1 plan-mode; "
        "3 with a blocking teachback, 3 with an auditor"
    )
    assert len(lines) == 8


def test_pact_status_lists_the_items_a_gate_acted_on_first() -> None:
    """Among thousands of scored items, the few whose teachback or review is under way
    (or whose score pact.yaml set) come right after the totals, not after the rest."""
    state = gated_run([record_for(1, 1, 2, 1)] * (MAX_ROWS + 5))
    open_gates(state.items[item_key("c204", Phase.IMPLEMENT)]).state = "awaiting_review"
    open_gates(state.items[item_key("c203", Phase.IMPLEMENT)]).teachback_rounds = 1
    lines = gate_lines(state)
    assert "would have blocked" not in lines[0]
    assert lines[1].startswith("c203/implement: score 5") and "1 teachback(s) corrected" in lines[1]
    assert lines[2].startswith("c204/implement: score 5") and lines[2].endswith("awaiting review")
    assert lines[3].startswith("c0/implement")


def test_pact_status_lists_what_would_have_blocked_before_the_rest() -> None:
    """Advisory mode: the count of what blocking would have held is followed by those
    items, not by the first items of the state."""
    low, mid = record_for(1, 1, 2, 1), record_for(2, 2, 2, 2)
    state = gated_run([low, low, mid, low, mid])
    lines = gate_lines(state)
    assert lines[0].startswith("2 work call(s) would have blocked")
    assert [line.split(":")[0] for line in lines[2:]] == [
        "c2/implement",
        "c4/implement",
        "c0/implement",
        "c1/implement",
        "c3/implement",
    ]


def test_a_run_with_no_scored_item_shows_no_gates() -> None:
    state = RunState(run_id="r")
    state.items["c/implement"] = ItemState(component_id="c", phase=Phase.IMPLEMENT)
    assert gate_lines(state) == []
