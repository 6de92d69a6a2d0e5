"""Cancelling what an attempt runs in a sandbox, from outside the thread that runs it.

Rules:

- An attempt's work runs inside :func:`cancellable` with a :class:`threading.Event`
  that its owner sets when the attempt is cancelled: a fleet worker when its lease
  finds the attempt superseded (``pact cancel`` moved the item's current attempt on),
  the local executor when the run loop fences the attempt.
- Every sandbox waits for its command in short slices and, once the event is set,
  kills the command (a container with everything in it, or the process tree of a local
  command) and raises :class:`SandboxCancelled`; the container or workspace is removed
  as after any run. A cancelled attempt never reports a result of its own making.
- The event travels in a context variable, so the agent and the harness between the
  owner and the sandbox need not know about it; a sandbox called outside any
  :func:`cancellable` block is never cancelled.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from pact_workers.errors import SandboxError

__all__ = [
    "POLL_S",
    "SandboxCancelled",
    "cancel_event",
    "cancellable",
    "check_cancelled",
    "pause",
]

#: How often a waiting sandbox looks at the cancel event (the bound on how late a kill is).
POLL_S = 0.25

_current: ContextVar[threading.Event | None] = ContextVar("pact_sandbox_cancel", default=None)


class SandboxCancelled(SandboxError):
    """The attempt was cancelled while its command ran; the command was killed."""


@contextmanager
def cancellable(event: threading.Event) -> Iterator[threading.Event]:
    """Run the block's sandboxed commands so that setting ``event`` kills them."""
    token = _current.set(event)
    try:
        yield event
    finally:
        _current.reset(token)


def cancel_event() -> threading.Event | None:
    """The cancel event of the attempt this thread runs, if any."""
    return _current.get()


def check_cancelled(what: str) -> None:
    """Raise :class:`SandboxCancelled` when the current attempt was cancelled.

    Args:
        what: what was stopped, for the message (``"the agent command"``).
    """
    event = _current.get()
    if event is not None and event.is_set():
        raise SandboxCancelled(f"{what} was stopped: the attempt was cancelled")


def pause(seconds: float) -> None:
    """Sleep ``seconds``, or less when the current attempt is cancelled meanwhile."""
    event = _current.get()
    if event is None:
        time.sleep(seconds)
    else:
        event.wait(seconds)
