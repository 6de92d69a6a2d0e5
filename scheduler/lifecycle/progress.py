"""The run loop's side of ``running`` and ``verifying``: what workers report through
their attempts' leases becomes ``item_progress`` events (mixed into
:class:`scheduler.run.RunController`).

An executor that can tell stages has ``stages()``: (attempt, stage) in the order the
attempts reported them since it was last asked (``agent``: running, ``verify``:
verifying). Only the current attempt of an item in flight moves, and never back from
verifying to running.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from pact_workers.models.work import IN_FLIGHT, ItemStatus, Phase
from scheduler.lifecycle.events import ItemProgress
from scheduler.runpart import RunPart
from scheduler.state import RunState, item_key

#: A worker's stage name -> the item status it means.
STAGE_STATUS = {"agent": ItemStatus.RUNNING, "verify": ItemStatus.VERIFYING}
_ORDER = [ItemStatus.DISPATCHED, ItemStatus.RUNNING, ItemStatus.VERIFYING]


def progress_events(
    state: RunState, stages: Sequence[tuple[tuple[str, Phase, int], str]]
) -> list[ItemProgress]:
    """The events that move each reported attempt forward (none for a stale report)."""
    out = []
    reached: dict[str, ItemStatus] = {}
    for (cid, phase, attempt), stage in stages:
        key = item_key(cid, phase)
        item = state.items.get(key)
        target = STAGE_STATUS.get(stage)
        if item is None or target is None or item.attempt != attempt:
            continue
        current = reached.get(key, item.status)
        if current not in IN_FLIGHT or _ORDER.index(target) <= _ORDER.index(current):
            continue
        reached[key] = target
        status = "running" if target is ItemStatus.RUNNING else "verifying"
        out.append(ItemProgress(component_id=cid, phase=phase, attempt=attempt, status=status))
    return out


class ProgressReporting(RunPart):
    """The part of the run controller that logs what workers report."""

    def report_progress(self) -> None:
        stages: Callable[[], Sequence[tuple[tuple[str, Phase, int], str]]] | None = getattr(
            self.executor, "stages", None
        )
        if stages is None:
            return
        for event in progress_events(self.state, stages()):
            self._log(event)
