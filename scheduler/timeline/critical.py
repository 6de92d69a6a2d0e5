"""The critical path of a finished run and the lower bound on its makespan.

Only accepted attempts count as the run's work (a lost or rejected attempt is waste, not
work the tree needed). With each work item's accepted duration:

- the **critical path** is the longest chain of prerequisites (the work-item graph of
  :class:`~scheduler.wavefront.WorkGraph`, contract-declared dependencies included), no
  schedule can finish sooner;
- the **work bound** is the total accepted work spread over every slot;
- the **lower bound** is the larger of the two; the makespan is from the first dispatch
  to the last result.

The bars marked critical are the accepted attempts along the longest chain.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pact_workers.models.tree import DecompositionTree
from pact_workers.models.work import Phase
from scheduler.timeline.bars import Bar, RunPicture
from scheduler.wavefront import WorkGraph

Key = tuple[str, Phase]


def longest_chain(graph: WorkGraph, durations: Mapping[Key, float]) -> tuple[float, list[Key]]:
    """(length, items) of the longest chain of prerequisites by ``durations`` (items
    missing from ``durations`` count 0)."""
    finish: dict[Key, float] = {}
    via: dict[Key, Key | None] = {}
    pending = list(graph.keys)
    # Iterative topological walk: a chain may be thousands of items deep.
    order: list[Key] = []
    seen: set[Key] = set()
    for root in pending:
        if root in seen:
            continue
        stack: list[tuple[Key, bool]] = [(root, False)]
        while stack:
            key, expanded = stack.pop()
            if expanded:
                order.append(key)
                continue
            if key in seen:
                continue
            seen.add(key)
            stack.append((key, True))
            stack.extend((p, False) for p in graph.prerequisite_map.get(key, []) if p not in seen)
    for key in order:
        best, best_key = 0.0, None
        for prereq in graph.prerequisite_map.get(key, []):
            if finish.get(prereq, 0.0) > best:
                best, best_key = finish[prereq], prereq
        finish[key] = best + durations.get(key, 0.0)
        via[key] = best_key
    if not finish:
        return 0.0, []
    # Ties go to the item latest in dependency order: the chain ends where the run does.
    end = max(reversed(order), key=lambda k: finish[k])
    chain: list[Key] = []
    cursor: Key | None = end
    while cursor is not None:
        chain.append(cursor)
        cursor = via[cursor]
    return finish[end], list(reversed(chain))


def picture(
    run_id: str,
    bars: Sequence[Bar],
    tree: DecompositionTree | None,
    dependencies: Mapping[str, Sequence[str]] | None,
) -> RunPicture:
    """The run's picture: bars with the critical ones marked, makespan and bounds."""
    lanes = sorted({b.lane for b in bars}, key=lambda lane: (lane.startswith("("), lane))
    accepted = {b.key: b.duration_s for b in bars if b.outcome == "succeeded"}
    work = sum(accepted.values())
    length, chain = (
        longest_chain(WorkGraph(tree, dependencies), accepted) if tree is not None else (0.0, [])
    )
    on_path = set(chain)
    marked = [
        b.model_copy(update={"critical": True})
        if b.outcome == "succeeded" and b.key in on_path
        else b
        for b in bars
    ]
    makespan = max(b.end_s for b in bars) - min(b.start_s for b in bars) if bars else 0.0
    slots = max(1, len([lane for lane in lanes if not lane.startswith("(")]))
    return RunPicture(
        run_id=run_id,
        bars=marked,
        lanes=lanes,
        makespan_s=makespan,
        critical_path_s=length,
        work_s=work,
        slots=slots,
        lower_bound_s=max(length, work / slots),
    )
