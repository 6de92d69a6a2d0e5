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


def test_pact_status_shows_the_count_of_what_would_have_blocked_before_the_items() -> None:
    """`pact status` shows a few hundred lines of a large run's gates: the count the
    team looks at before it flips the flag comes first, so it is never cut off."""
    dims = Dimensions(novelty=2, scope=1, uncertainty=1, risk=3)
    record = GateRecord(
        dimensions=dims, score=dims.score, gates=gates_for_score(dims.score), mode="advisory"
    )
    state = RunState(run_id="r")
    for i in range(MAX_ROWS + 5):
        item = ItemState(component_id=f"c{i}", phase=Phase.IMPLEMENT)
        gate_dispatched(item, record, "work")
        open_gates(item).would_have_blocked = True
        state.items[item_key(item.component_id, item.phase)] = item
    lines = gate_lines(state)
    assert lines[0].startswith(f"{MAX_ROWS + 5} work call(s) would have blocked (advisory)")
    assert len(lines) == MAX_ROWS + 6 and lines[1].startswith("c0/implement: score 7")
