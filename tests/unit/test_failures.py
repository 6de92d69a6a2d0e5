"""Early systemic detection from recent failures (``scheduler.failures``): an outage seen
from many components pauses the run before their retries are spent."""

from __future__ import annotations

from pact_workers.errors import UNREACHABLE_PREFIX, ProviderUnreachable
from pact_workers.models.work import ErrorClass, Phase
from scheduler.events import (
    Event,
    ItemDispatched,
    ItemFailed,
    ItemSucceeded,
    RunPaused,
    RunResumed,
    RunStarted,
)
from scheduler.failures import recent_failures, repeated_errors
from scheduler.fold import apply
from scheduler.policy import STALLED, WORKER_LOST
from scheduler.state import RunState
from scheduler.systemic import detect_systemic_failure
from scheduler.verdicts import systemic_pause
from tests.runs import star_tree

THRESHOLD = 3
REFUSED = "ConnectError: [Errno 111] Connection refused"


def unreachable(endpoint: str = "api.example.test:443") -> tuple[str, str]:
    error = ProviderUnreachable(endpoint, f"anthropic API: {REFUSED}; gave up after 5 attempts")
    return type(error).__name__, str(error)


RATE_LIMITED = ("TransientAgentError", "anthropic: HTTP 429 rate_limit_error: slow down")


class Run:
    """A run's state, built by applying numbered events as the run loop logs them."""

    def __init__(self, leaves: int = 6) -> None:
        self.state = RunState()
        tree = star_tree(leaves)
        self.log(RunStarted(run_id="r1", tree=tree.model_dump(mode="json")))

    def log(self, event: Event) -> None:
        apply(self.state, event.model_copy(update={"seq": self.state.last_seq + 1}))

    def fail(
        self,
        cid: str,
        error: tuple[str, str],
        *,
        phase: Phase = Phase.CONTRACT,
        error_class: ErrorClass = ErrorClass.TRANSIENT,
        attempt: int = 1,
    ) -> None:
        error_type, message = error
        self.log(ItemDispatched(component_id=cid, phase=phase, attempt=attempt, role="r"))
        self.log(
            ItemFailed(
                component_id=cid,
                phase=phase,
                attempt=attempt,
                error_class=error_class,
                error_type=error_type,
                error=message,
                decision="retry",
                retry_at=100.0,
            )
        )


def test_an_unreachable_provider_on_threshold_components_is_a_systemic_pattern() -> None:
    run = Run()
    for cid in ("c1", "c2", "c3"):
        run.fail(cid, unreachable())

    results = recent_failures(run.state)[Phase.CONTRACT]
    pattern = detect_systemic_failure(results, threshold=THRESHOLD)

    assert pattern is not None and pattern.pattern_type == "provider_unreachable"
    assert pattern.affected_components == ["c1", "c2", "c3"]
    assert pattern.sample_error.startswith(UNREACHABLE_PREFIX + "api.example.test:443")
    assert pattern.recommendation.startswith("the provider is unreachable from this worker")
    assert "api.example.test:443" in pattern.recommendation
    assert "`pact resume DIR`" in pattern.recommendation


def test_the_run_loop_pauses_at_the_threshold_with_the_unreachable_message() -> None:
    """What the run loop logs after a batch (``systemic_pause``): nothing at two
    components, a pause that says the provider is unreachable at three."""
    run = Run()
    run.fail("c1", unreachable())
    run.fail("c2", unreachable())
    assert systemic_pause(run.state, THRESHOLD) is None
    run.fail("c3", unreachable())

    pause = systemic_pause(run.state, THRESHOLD)

    assert isinstance(pause, RunPaused)
    assert UNREACHABLE_PREFIX + "api.example.test:443" in pause.reason
    assert pause.pattern_type == "provider_unreachable"
    assert pause.affected_components == ["c1", "c2", "c3"]
    assert pause.recommendation.startswith("the provider is unreachable from this worker")


def test_one_component_failing_again_and_again_is_no_pattern() -> None:
    run = Run()
    for attempt in (1, 2, 3, 4):
        run.fail("c1", unreachable(), attempt=attempt)
    run.fail("c2", unreachable())
    assert detect_systemic_failure(recent_failures(run.state)[Phase.CONTRACT], THRESHOLD) is None
    assert repeated_errors(run.state, THRESHOLD) is None


def test_two_providers_down_pause_only_for_the_one_that_reaches_the_threshold() -> None:
    run = Run()
    run.fail("c1", unreachable("a.example.test:443"))
    run.fail("c2", unreachable("b.example.test:8000"))
    run.fail("c3", unreachable("a.example.test:443"))
    results = recent_failures(run.state)[Phase.CONTRACT]
    assert detect_systemic_failure(results, threshold=THRESHOLD) is None
    run.fail("c4", unreachable("a.example.test:443"))
    results = recent_failures(run.state)[Phase.CONTRACT]
    pattern = detect_systemic_failure(results, threshold=THRESHOLD)
    assert pattern is not None and pattern.affected_components == ["c1", "c3", "c4"]


def test_rate_limits_on_every_component_are_never_systemic() -> None:
    """Backing off is the cure for 429s: no pattern, no repeated error, no pause."""
    run = Run()
    for cid in ("c1", "c2", "c3", "c4", "c5", "c6"):
        run.fail(cid, RATE_LIMITED)
    assert recent_failures(run.state) == {}
    assert repeated_errors(run.state, THRESHOLD) is None
    assert systemic_pause(run.state, THRESHOLD) is None


def test_lost_workers_and_stalls_are_left_to_the_retries() -> None:
    run = Run()
    for cid in ("c1", "c2", "c3"):
        run.fail(cid, (WORKER_LOST, "WorkerLost: the worker's lease expired"))
    for cid in ("c4", "c5", "c6"):
        run.fail(cid, (STALLED, "no activity from the worker"))
    assert repeated_errors(run.state, THRESHOLD) is None
    assert systemic_pause(run.state, THRESHOLD) is None


def test_a_refused_connection_an_agent_let_through_counts_as_a_repeated_error() -> None:
    """Transient failures that say the worker reached no one (here the OS's own
    ConnectionRefusedError) are an outage when they repeat across components."""
    run = Run()
    refused = ("ConnectionRefusedError", "ConnectionRefusedError: [Errno 111] Connection refused")
    run.fail("c1", refused)
    run.fail("c2", refused)
    assert repeated_errors(run.state, THRESHOLD) is None
    run.fail("c3", refused)
    assert repeated_errors(run.state, THRESHOLD) == (Phase.CONTRACT, refused[1], ["c1", "c2", "c3"])


def test_permanent_errors_still_count_as_before() -> None:
    run = Run()
    for cid in ("c1", "c2", "c3"):
        run.fail(cid, ("PermanentAgentError", "bad request"), error_class=ErrorClass.PERMANENT)
    assert repeated_errors(run.state, THRESHOLD) == (
        Phase.CONTRACT,
        "bad request",
        ["c1", "c2", "c3"],
    )


def test_failures_before_the_last_resume_and_items_since_done_do_not_count() -> None:
    run = Run()
    for cid in ("c1", "c2", "c3"):
        run.fail(cid, unreachable())
    run.log(RunPaused(reason="provider unreachable"))
    run.log(
        RunResumed(
            original_status="paused",
            reset_items=[(cid, Phase.CONTRACT) for cid in ("c1", "c2", "c3")],
        )
    )
    assert recent_failures(run.state) == {}
    assert systemic_pause(run.state, THRESHOLD) is None

    run.fail("c1", unreachable(), attempt=2)
    run.fail("c2", unreachable(), attempt=2)
    run.log(ItemDispatched(component_id="c1", phase=Phase.CONTRACT, attempt=3, role="r"))
    run.log(ItemSucceeded(component_id="c1", phase=Phase.CONTRACT, attempt=3, output="sha256:0"))
    run.fail("c3", unreachable(), attempt=2)
    assert sorted(recent_failures(run.state)[Phase.CONTRACT]) == ["c2", "c3"]
    assert systemic_pause(run.state, THRESHOLD) is None
