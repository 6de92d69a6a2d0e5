"""Ctrl-C (and SIGTERM) during a run: stop between two steps, save, say how to go on.

The first signal sets a flag the run loop checks between steps; the loop writes
its snapshot and releases the run, attempts in flight are abandoned (``pact
resume`` dispatches them again: the audit log already says they were in
flight), and the process exits with 130 after printing how to continue. A
second signal exits at once: everything acted on is in the fsynced log already.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType

from scheduler.cli.app import EXIT_INTERRUPTED, say

SIGNALS = (signal.SIGINT, signal.SIGTERM)


def continue_hint(project: Path) -> str:
    return (
        f"the run in {project} was stopped and is saved; continue it with `pact resume {project}`"
    )


def exit_interrupted(project: Path) -> None:
    """Say how to continue and leave at once (threads of abandoned attempts included)."""
    say(continue_hint(project), label="interrupted", to_err=True)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(EXIT_INTERRUPTED)


@contextmanager
def interruptible(project: Path) -> Iterator[threading.Event]:
    """Yield the event a run loop watches; a signal sets it (a second one exits)."""
    stop = threading.Event()

    def handle(_signum: int, _frame: FrameType | None) -> None:
        if stop.is_set():
            exit_interrupted(project)
        stop.set()
        say("stopping after the current step (again to stop at once) ...", to_err=True)

    previous = {sig: signal.signal(sig, handle) for sig in SIGNALS}
    try:
        yield stop
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if stop.is_set():
        exit_interrupted(project)
