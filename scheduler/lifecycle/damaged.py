"""Folding a log that may be damaged: what ``pact rebuild``, ``pact status`` and an
opening run do when they fold the log from its first line (or a snapshot's end).

A skipped line can make the events after it illegal (a result for an attempt whose
dispatch was on the lost line). An intact log is folded strictly: an illegal event
is an error. A damaged one is folded as far as it goes: each event the lifecycle
refuses is skipped too, and a logged warning names it (the unreadable line that
caused it is already among the log's warnings).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence

from scheduler.events import Event
from scheduler.fold import apply
from scheduler.lifecycle.machine import IllegalTransition
from scheduler.state import RunState

log = logging.getLogger(__name__)


def fold_as_read(
    events: Iterable[Event], warnings: Sequence[str], state: RunState | None = None
) -> RunState:
    """Fold ``events`` as a reader yields them (e.g. :func:`scheduler.audit.scan_events`),
    while ``warnings`` fills with the log's unreadable lines: the whole log is never
    held at once, yet the result is the one of reading it first.

    Strict if the log turns out intact: an event the lifecycle refuses is then an
    error (the first one refused is raised, once the log is read). Otherwise every
    event refused is skipped and logged.

    Any other error of the fold is raised as it comes, unless an event was refused
    before it: which of the two is the log's error is then known only once every line
    is read, so the rest is read without being folded.
    """
    state = state if state is not None else RunState()
    refused: list[IllegalTransition] = []
    failed: Exception | None = None
    for event in events:
        if failed is not None:
            continue  # reading on: an unreadable line decides which error is raised
        try:
            apply(state, event)
        except IllegalTransition as exc:
            refused.append(exc)  # an error or a skip: known once every line is read
        except Exception as exc:
            if not refused:
                raise
            failed = exc
    if refused and not warnings:
        raise refused[0]
    if failed is not None:
        raise failed
    for refusal in refused[:SHOWN]:
        log.warning("skipped after an unreadable line: %s", refusal)
    if len(refused) > SHOWN:
        log.warning(
            "skipped after an unreadable line: %d more events the lifecycle refused",
            len(refused) - SHOWN,
        )
    return state


#: Refused events named one by one; the rest are counted (a lost first line, the run's
#: start, makes every event refused).
SHOWN = 10
