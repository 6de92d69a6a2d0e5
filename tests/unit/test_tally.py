"""Following a run as it works: counts from the state's index, reports throttled, the
drive's end always reported (the MCP server's progress notices, the CLI's bar)."""

from __future__ import annotations

from pathlib import Path

from pact_workers.models.tree import load_tree
from pact_workers.models.work import Phase
from scheduler.events import ItemDispatched, RunPaused, RunStarted
from scheduler.fold import fold
from scheduler.lifecycle.events import ItemProgress
from scheduler.tally import ProgressTally, finished


def test_reports_are_throttled_and_the_drives_end_is_always_reported(example: Path) -> None:
    tree = load_tree(example / "tree.json")
    state = fold([RunStarted(run_id="r1", tree=tree.model_dump(mode="json"), seq=1)])
    reports: list[tuple[int, int, str]] = []
    tally = ProgressTally(lambda *report: reports.append(report), every_s=3600)
    root = tree.root_id
    events = [
        ItemDispatched(component_id=root, phase=Phase.CONTRACT, attempt=1, role="r", seq=2),
        ItemProgress(component_id=root, phase=Phase.CONTRACT, attempt=1, status="running", seq=3),
        RunPaused(reason="a test", seq=4),
    ]
    for event in events:  # what each event did to the state does not matter here
        tally(event, state)
    items = len(state.items)
    assert reports == [
        (0, items, f"{root}/contract #1 dispatched"),  # the first; none more within the hour
        (0, items, "run paused"),  # but the end, whenever it comes
    ]
    assert finished(state) == 0 and items == 30
