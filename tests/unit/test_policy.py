"""The failure policy: retries, pauses and giving up (``scheduler.policy.decide``)."""

from __future__ import annotations

import random

import pytest

from pact_workers.errors import UNREACHABLE_PREFIX, ProviderUnreachable
from pact_workers.models.work import ErrorClass, Phase, ResultMessage, SuspensionKind
from pact_workers.runner import REJECTED, TESTS_FAILED
from scheduler.policy import DEPENDENCY_CYCLE, STALLED, WORKER_LOST, Decision, decide
from scheduler.settings import Settings
from scheduler.state import INTERRUPTED, ItemState

NOW = 1_000.0
SETTINGS = Settings(max_retries=3, max_attempts=3, backoff_base_s=1.0, backoff_cap_s=8.0)
UNREACHABLE = ProviderUnreachable(
    "api.example.test:443", "anthropic API: ConnectError: [Errno 111] Connection refused"
)
#: (error_type, error) of transient failures as attempts report them.
TRANSIENT_FAILURES = {
    "provider_unreachable": ("ProviderUnreachable", str(UNREACHABLE)),
    "overloaded": ("TransientAgentError", "anthropic: HTTP 529 overloaded_error: Overloaded"),
    "rate_limit": ("TransientAgentError", "anthropic: HTTP 429 rate_limit_error: slow down"),
    "worker_lost": (WORKER_LOST, "WorkerLost: the worker's lease expired"),
    "redis_down": ("ConnectionError", "ConnectionError: Error 111 connecting to redis:6379"),
}


def failure(
    error_type: str, error: str, error_class: ErrorClass = ErrorClass.TRANSIENT
) -> ResultMessage:
    return ResultMessage(
        run_id="r1",
        component_id="lexer",
        phase=Phase.CONTRACT,
        attempt=1,
        outcome="error",
        error_class=error_class,
        error_type=error_type,
        error=error,
    )


def item(**counts: int) -> ItemState:
    return ItemState(component_id="lexer", phase=Phase.CONTRACT, **counts)


def run_decide(result: ResultMessage, state: ItemState) -> Decision:
    return decide(result, state, SETTINGS, now=NOW, rng=random.Random(7))


@pytest.mark.parametrize("kind", sorted(TRANSIENT_FAILURES))
def test_a_transient_failure_is_retried_later_while_retries_remain(kind: str) -> None:
    error_type, error = TRANSIENT_FAILURES[kind]
    for spent in range(SETTINGS.max_retries):
        decision = run_decide(failure(error_type, error), item(transient_failures=spent))
        assert decision.action == "retry", (spent, decision)
        assert decision.retry_at is not None and NOW < decision.retry_at <= NOW + 8.0


@pytest.mark.parametrize("kind", sorted(TRANSIENT_FAILURES))
def test_spent_transient_retries_pause_the_run_and_never_give_up(kind: str) -> None:
    """A transient failure past max_retries pauses (the item suspended far); it never
    gives the item up, so nothing is poisoned by a network that is down."""
    error_type, error = TRANSIENT_FAILURES[kind]
    for spent in range(SETTINGS.max_retries, SETTINGS.max_retries + 4):
        decision = run_decide(failure(error_type, error), item(transient_failures=spent))
        assert decision.action == "pause", (spent, decision)
        assert decision.suspension is SuspensionKind.FAR
        assert f"after {SETTINGS.max_retries} retries" in decision.reason
        assert "pact resume" in decision.recommendation


def test_an_unreachable_provider_pause_says_so_and_how_to_go_on() -> None:
    decision = run_decide(
        failure("ProviderUnreachable", str(UNREACHABLE)), item(transient_failures=3)
    )
    assert decision.reason.startswith(UNREACHABLE_PREFIX + "api.example.test:443")
    assert "Connection refused" in decision.reason
    assert decision.recommendation.startswith("the provider is unreachable from this worker")
    assert "base_url" in decision.recommendation
    assert "`pact resume DIR`" in decision.recommendation


def test_an_unreachable_provider_is_recognised_by_its_message_too() -> None:
    """A result whose type was lost on the way (e.g. wrapped by another agent) but whose
    message is the ProviderUnreachable message gets the same advice."""
    decision = run_decide(failure("AgentError", str(UNREACHABLE)), item(transient_failures=3))
    assert decision.recommendation.startswith("the provider is unreachable from this worker")


def test_a_lost_worker_pause_names_the_lost_lease_and_the_workers() -> None:
    error_type, error = TRANSIENT_FAILURES["worker_lost"]
    decision = run_decide(failure(error_type, error), item(transient_failures=3))
    assert decision.action == "pause"
    assert "WorkerLost: the worker's lease expired" in decision.reason
    assert "`pact workers`" in decision.recommendation and "Redis" in decision.recommendation


def test_a_rate_limit_backs_off_longer_with_every_retry_and_is_never_escalated() -> None:
    """429 is retried with a growing backoff; it is never systemic, never a give-up."""
    error_type, error = TRANSIENT_FAILURES["rate_limit"]
    settings = Settings(max_retries=6, backoff_base_s=1.0, backoff_cap_s=1000.0)
    delays = []
    for spent in range(settings.max_retries):
        decision = decide(
            failure(error_type, error),
            item(transient_failures=spent),
            settings,
            now=NOW,
            rng=random.Random(3),
        )
        assert decision.action == "retry"
        assert decision.retry_at is not None
        delays.append(decision.retry_at - NOW)
    assert delays == sorted(delays) and delays[-1] > 4 * delays[0]


def test_a_second_stall_pauses_the_run_instead_of_poisoning() -> None:
    """A stall is transient (a network that drops packets looks the same): the second
    one on an item halts the run for a person, and gives nothing up."""
    result = failure(STALLED, "TimeoutError: no activity from the worker for 300s")
    first = run_decide(result, item())
    assert first.action == "retry" and first.suspension is SuspensionKind.WILD
    second = run_decide(result, item(wild_count=1, transient_failures=1))
    assert second.action == "pause" and second.suspension is SuspensionKind.WILD
    assert "second wild suspension" in second.reason
    assert "role_timeouts" in second.recommendation and "pact resume" in second.recommendation


def test_a_second_rejected_output_still_gives_the_item_up() -> None:
    result = failure(REJECTED, "interface.json: not a contract", ErrorClass.PERMANENT)
    decision = run_decide(result, item(wild_count=1, rejections=1))
    assert decision.action == "give_up" and decision.suspension is SuspensionKind.WILD


def test_failing_tests_are_retried_then_given_up() -> None:
    result = failure(TESTS_FAILED, "2 of 5 tests failed", ErrorClass.PERMANENT)
    assert run_decide(result, item(rejections=1)).action == "retry"
    assert run_decide(result, item(rejections=2)).action == "give_up"


def test_a_permanent_error_gives_up_and_a_systemic_one_pauses() -> None:
    permanent = failure("PermanentAgentError", "prompt too long", ErrorClass.PERMANENT)
    assert run_decide(permanent, item()).action == "give_up"
    systemic = failure("SystemicAgentError", "the API refused the key", ErrorClass.SYSTEMIC)
    decision = run_decide(systemic, item())
    assert decision.action == "pause" and decision.suspension is SuspensionKind.FAR


def test_an_interrupted_attempt_is_dispatched_again_at_once_whatever_its_retries() -> None:
    decision = run_decide(failure(INTERRUPTED, "the scheduler stopped"), item(transient_failures=9))
    assert decision == Decision("retry", retry_at=NOW, reason=decision.reason)


def test_a_dependency_cycle_is_void() -> None:
    result = failure(DEPENDENCY_CYCLE, "a -> b -> a", ErrorClass.PERMANENT)
    decision = run_decide(result, item())
    assert decision.action == "give_up" and decision.suspension is SuspensionKind.VOID
