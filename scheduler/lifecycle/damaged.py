"""Folding a damaged log: what ``pact rebuild`` and ``pact status`` do when some of
the log's lines could not be read.

A skipped line can make the events after it illegal (a result for an attempt whose
dispatch was on the lost line). A log read whole is folded strictly: an illegal
event is an error. A log already known to be damaged is folded as far as it goes:
each event the lifecycle refuses is skipped too, and a logged warning names it
(the unreadable line that caused it is already among the log's warnings).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence

from scheduler.events import Event
from scheduler.fold import apply
from scheduler.lifecycle.machine import IllegalTransition
from scheduler.state import RunState

log = logging.getLogger(__name__)


def fold_damaged(events: Iterable[Event], state: RunState | None = None) -> RunState:
    """Fold ``events`` (read from a log with unreadable lines), skipping and logging
    the events the lifecycle refuses."""
    state = state if state is not None else RunState()
    for event in events:
        try:
            apply(state, event)
        except IllegalTransition as exc:
            log.warning("skipped after an unreadable line: %s", exc)
    return state


def fold_as_read(
    events: Iterable[Event], warnings: Sequence[str], state: RunState | None = None
) -> RunState:
    """Fold ``events`` as a reader yields them (e.g. :func:`scheduler.audit.scan_events`),
    while ``warnings`` fills with the log's unreadable lines: the whole log is never
    held at once, yet the result is the one of reading it first.

    Strict if the log turns out intact: an event the lifecycle refuses is then an
    error (the first one refused is raised, once the log is read). Otherwise as
    :func:`fold_damaged`: every event refused is skipped and logged.

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
    for refusal in refused:
        log.warning("skipped after an unreadable line: %s", refusal)
    return state
