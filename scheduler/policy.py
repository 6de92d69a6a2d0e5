"""Failure policy: what to do about a failed attempt. Returns decisions; callers act.

- TRANSIENT (network, rate limit, provider unreachable, lost worker, stalled agent):
  retry after exponential backoff with jitter, up to ``max_retries``. A transient
  failure never fails a run and never poisons anything: when an item's retries are
  spent, the run *pauses* (the item is suspended *far*) with a recommendation, and
  ``pact resume`` gives the item fresh retries once the cause is gone.
- Output the harness rejected (tests failed, invalid contract): retry at once
  with the failure details as feedback, up to ``max_attempts``; then PERMANENT.
- Typed suspension: a schema violation or a stalled agent is *wild*; the second
  wild on the same item halts it (A7-RT: same-node recurrence halts). For output the
  harness rejected, halting is giving up (the item fails, its dependents are
  poisoned). A stall is transient: the agent went quiet, which a network that drops
  packets (or a provider that stops answering) causes as surely as an agent that hangs,
  so the second stall halts the *run* instead (a pause) and poisons nothing.
  A dependency cycle is *void*: retrying cannot help.
- PERMANENT: give up on the item; the caller poisons its dependents.
- SYSTEMIC: pause the run (a human must fix the environment).

Many components failing alike pause the run before their retries are spent: that is
systemic detection (``scheduler.failures``, ``scheduler.systemic``), not this module.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Literal

from pact_workers.backoff import backoff_s
from pact_workers.errors import UNREACHABLE_PREFIX, ProviderUnreachable
from pact_workers.models.work import ErrorClass, ResultMessage, SuspensionKind
from pact_workers.runner import REJECTED, TESTS_FAILED
from scheduler.gates.events import AUDIT_REJECTED
from scheduler.lifecycle.guards import can_retry
from scheduler.settings import Settings
from scheduler.state import INTERRUPTED, ItemState

#: ``error_type`` of an attempt whose agent went quiet for longer than its role's timeout.
STALLED = "stalled"
#: ``error_type`` of an attempt whose worker stopped renewing its lease.
WORKER_LOST = "worker_lost"
#: ``error_type`` of a contract whose new dependencies would close a cycle.
DEPENDENCY_CYCLE = "dependency_cycle"
#: Wild suspensions on one item before it is halted (A7-RT: same-node recurrence halts).
MAX_WILD = 2

#: What to do once the network to the model provider (or the provider) is back.
UNREACHABLE_ADVICE = (
    "restore this worker's network route to the provider (proxy, DNS, firewall) or wait "
    "for the provider to come back; if the address is wrong, fix base_url under agents: "
    "in pact.yaml. Then run `pact resume DIR`: the paused items start again with fresh "
    "retries"
)


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
        if cls is ErrorClass.TRANSIENT:
            return Decision(
                "pause",
                reason=f"second wild suspension on this item: {result.error}",
                suspension=SuspensionKind.WILD,
                recommendation=_stalled_advice(),
            )
        return Decision(
            "give_up",
            reason=f"second wild suspension on this item: {result.error}",
            suspension=SuspensionKind.WILD,
        )
    suspension = SuspensionKind.WILD if wild else None
    if cls is ErrorClass.TRANSIENT:
        failures = item.transient_failures + 1
        # The lifecycle table's can_retry guard (scheduler.lifecycle.guards) decides.
        if not can_retry(
            item,
            error_class=cls,
            max_retries=settings.max_retries,
            max_attempts=settings.max_attempts,
        ):
            return _retries_spent(result, settings)
        delay = backoff_s(
            failures, base_s=settings.backoff_base_s, cap_s=settings.backoff_cap_s, rng=rng
        )
        return Decision(
            "retry",
            retry_at=now + delay,
            reason=f"transient, retry {failures}",
            suspension=suspension,
        )
    if result.error_type in {TESTS_FAILED, REJECTED, AUDIT_REJECTED}:
        attempts = item.rejections + 1
        if can_retry(
            item,
            error_class=ErrorClass.PERMANENT,
            max_retries=settings.max_retries,
            max_attempts=settings.max_attempts,
        ):
            return Decision(
                "retry", retry_at=now, reason=f"attempt {attempts} rejected", suspension=suspension
            )
        return Decision(
            "give_up",
            reason=f"rejected on all {settings.max_attempts} attempts: {result.error}",
            suspension=suspension,
        )
    return Decision("give_up", reason=result.error)


def is_unreachable(result: ResultMessage) -> bool:
    """The attempt failed because its worker could not reach the model provider at all."""
    return result.error_type == ProviderUnreachable.__name__ or result.error.startswith(
        UNREACHABLE_PREFIX
    )


def _retries_spent(result: ResultMessage, settings: Settings) -> Decision:
    """A transient failure past ``max_retries``: pause the run, never poison anything."""
    spent = f"still failing after {settings.max_retries} retries"
    if is_unreachable(result):
        # The error says what is unreachable; the pause reason starts with it.
        return Decision(
            "pause",
            reason=f"{result.error}; {spent}",
            suspension=SuspensionKind.FAR,
            recommendation=f"the provider is unreachable from this worker: {UNREACHABLE_ADVICE}",
        )
    if result.error_type == WORKER_LOST:
        advice = (
            "the workers running this item stopped renewing their leases: check that "
            "workers are running (`pact workers`), that they reach Redis at the broker URL "
            "and are not being killed (memory, time limits); then run `pact resume DIR`"
        )
    else:
        advice = (
            "the failure is transient (a rate limit, an overloaded or unreachable service, "
            "a lost connection): wait until it clears (raise max_retries or backoff_cap_s "
            "in pact.yaml if it is routine), then run `pact resume DIR`: the paused items "
            "start again with fresh retries"
        )
    return Decision(
        "pause",
        reason=f"{spent}: {result.error}",
        suspension=SuspensionKind.FAR,
        recommendation=advice,
    )


def _stalled_advice() -> str:
    return (
        "the agent went quiet twice on this item: if the network to the model provider "
        "drops, restore it; if the agent needs longer, raise role_timeouts.<role> or set "
        "impatience: patient in pact.yaml; if it hangs, fix the agent. Then run "
        "`pact resume DIR`"
    )
