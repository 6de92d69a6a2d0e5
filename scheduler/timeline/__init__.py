"""A picture of a run: its attempts as a Gantt chart over the worker slots.

The rules:

- One lane per worker slot that reported an attempt (``host/thread`` in process,
  ``host/pid`` for a fleet worker); attempts no worker reported on (lost with their
  worker, stalled, cut off by a stopped scheduler) share the lane ``(no report)``.
- One bar per attempt, from its dispatch to its result, filled by phase and marked by
  outcome: succeeded, retried, lost, failed, dropped, running (:mod:`.bars`).
- The accepted attempts on the longest chain of prerequisites are the critical path;
  the makespan is printed against the lower bound max(critical path, accepted work /
  slots) (:mod:`.critical`).
- Drawn with matplotlib as ``.svg``, ``.png`` or ``.html`` (:mod:`.render`).

Everything comes from the audit log; nothing here writes but the picture itself.
"""

from __future__ import annotations

from scheduler.timeline.bars import NO_REPORT, Bar, RunPicture, collect_bars
from scheduler.timeline.critical import longest_chain, picture
from scheduler.timeline.render import FORMATS, summary_line, write_picture

__all__ = [
    "FORMATS",
    "NO_REPORT",
    "Bar",
    "RunPicture",
    "collect_bars",
    "longest_chain",
    "picture",
    "summary_line",
    "write_picture",
]
