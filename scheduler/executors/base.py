"""The executor interface: hand out task messages, collect result messages."""

from __future__ import annotations

from typing import NamedTuple, Protocol, runtime_checkable

from pact_workers.models.work import Phase, ResultMessage, TaskMessage

#: Why an attempt whose running lease lapsed counts as lost.
LEASE_EXPIRED = "the worker's lease expired (it stopped or lost Redis)"


class LostAttempt(NamedTuple):
    """An attempt whose worker is gone, and how the executor knows (for the audit log)."""

    lease: tuple[str, Phase, int]  # component, phase, attempt
    why: str


@runtime_checkable
class Executor(Protocol):
    """Runs attempts somewhere; every submitted task yields exactly one result."""

    name: str
    #: How many attempts it runs at once (the scheduler never dispatches more).
    capacity: int

    def submit(self, task: TaskMessage) -> None: ...

    def poll(self, timeout_s: float) -> list[ResultMessage]:
        """Results that arrived, waiting up to ``timeout_s`` for the first one."""
        ...

    def activity(self) -> list[tuple[str, Phase, int]]:
        """(component, phase, attempt) of attempts that showed signs of life since last asked."""
        ...

    #: True when attempts keep running while the scheduler is down (a fleet); then a
    #: restarted scheduler adopts them instead of dispatching them again.
    survives_restart: bool

    def ack(self, result: ResultMessage) -> None:
        """The result is in the audit log: the executor may forget it for good."""
        ...

    def lost(self) -> list[LostAttempt]:
        """Attempts whose worker is gone (lease expired, message lost); each reported once."""
        ...

    def adopt(self, attempts: list[tuple[str, Phase, int]]) -> None:
        """Watch attempts a previous scheduler dispatched (after a restart)."""
        ...

    def close(self) -> None: ...
