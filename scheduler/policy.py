"""Failure policy: what to do about a failed attempt. Returns decisions; callers act.

- TRANSIENT (network, rate limit, lost worker): retry after exponential backoff
  with jitter, up to ``max_retries``; a transient failure never fails a run.
- Output the harness rejected (tests failed, invalid contract): retry at once
  with the failure details as feedback, up to ``max_attempts``; then PERMANENT.
- Typed suspension: a schema violation or a stalled agent is *wild*; the second
  wild on the same item halts it. A dependency cycle is *void*: retrying cannot help.
- PERMANENT: give up on the item; the caller poisons its dependents.
- SYSTEMIC: pause the run (a human must fix the environment).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Literal

from pact_workers.backoff import backoff_s
from pact_workers.models.work import ErrorClass, ResultMessage, SuspensionKind
from pact_workers.runner import REJECTED, TESTS_FAILED
from scheduler.settings import Settings
from scheduler.state import INTERRUPTED, ItemState

#: ``error_type`` of an attempt whose agent went quiet for longer than its role's timeout.
STALLED = "stalled"
#: ``error_type`` of an attempt whose worker stopped renewing its lease.
WORKER_LOST = "worker_lost"
#: ``error_type`` of a contract whose new dependencies would close a cycle.
DEPENDENCY_CYCLE = "dependency_cycle"
#: Wild suspensions on one item before it is given up (A7-RT: same-node recurrence halts).
MAX_WILD = 2


@dataclass(frozen=True)
class Decision:
    action: Literal["retry", "give_up", "pause"]
    retry_at: float | None = None
    reason: str = ""
    suspension: SuspensionKind | None = None
    #: For a pause: what a person should do (shown by ``pact status``); empty: the default.
    recommendation: str = ""


def decide(
    result: ResultMessage,
    item: ItemState,
    settings: Settings,
    *,
    now: float,
    rng: random.Random,
) -> Decision:
    """Decide what follows a failed ``result`` of ``item`` (state before the failure)."""
    cls = result.error_class or ErrorClass.PERMANENT
    if result.error_type == INTERRUPTED:
        return Decision("retry", retry_at=now, reason="attempt interrupted; dispatching again")
    if result.error_type == DEPENDENCY_CYCLE:
        return Decision("give_up", reason=result.error, suspension=SuspensionKind.VOID)
    if cls is ErrorClass.SYSTEMIC:
        return Decision("pause", reason=result.error, suspension=SuspensionKind.FAR)
    wild = result.error_type in {REJECTED, STALLED}
    if wild and item.wild_count + 1 >= MAX_WILD:
        return Decision(
            "give_up",
            reason=f"second wild suspension on this item: {result.error}",
            suspension=SuspensionKind.WILD,
        )
    suspension = SuspensionKind.WILD if wild else None
    if cls is ErrorClass.TRANSIENT:
        failures = item.transient_failures + 1
        if failures > settings.max_retries:
            return Decision(
                "give_up",
                reason=f"still failing after {settings.max_retries} retries: {result.error}",
                suspension=suspension,
            )
        delay = backoff_s(
            failures, base_s=settings.backoff_base_s, cap_s=settings.backoff_cap_s, rng=rng
        )
        return Decision(
            "retry",
            retry_at=now + delay,
            reason=f"transient, retry {failures}",
            suspension=suspension,
        )
    if result.error_type in {TESTS_FAILED, REJECTED}:
        attempts = item.rejections + 1
        if attempts < settings.max_attempts:
            return Decision(
                "retry", retry_at=now, reason=f"attempt {attempts} rejected", suspension=suspension
            )
        return Decision(
            "give_up",
            reason=f"rejected on all {settings.max_attempts} attempts: {result.error}",
            suspension=suspension,
        )
    return Decision("give_up", reason=result.error)
