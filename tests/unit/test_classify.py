"""Error classification: transient, permanent or systemic (seed 000, 1.2)."""

from __future__ import annotations

import asyncio
import errno
import socket
from typing import Any

import pytest
import redis.exceptions

from pact_workers.classify import ErrorClassification, classify_error, error_signature
from pact_workers.errors import (
    AgentError,
    BrokerAuthError,
    BrokerUnavailable,
    BudgetExceededError,
    EnvironmentSpecError,
    InputError,
    PermanentAgentError,
    ProviderUnreachable,
    SandboxTimeout,
    SettingsError,
    TransientAgentError,
    VerificationError,
)
from pact_workers.models.work import ErrorClass, Phase


def _foreign(name: str, module: str, base: type[Exception] = Exception) -> type[Exception]:
    """An exception class as an optional SDK (httpx, anthropic) would define it."""
    return type(name, (base,), {"__module__": module})


class _StatusError(Exception):
    """Shaped like the provider SDKs' APIStatusError: the status is an attribute."""

    def __init__(self, status_code: int) -> None:
        super().__init__(f"HTTP {status_code}")
        self.status_code = status_code


class _Response:
    def __init__(self, status_code: int) -> None:
        self.status_code = status_code


HttpxReadTimeout = _foreign("ReadTimeout", "httpx._exceptions")
HttpcoreConnectError = _foreign("ConnectError", "httpcore._exceptions")
AnthropicRateLimit = _foreign("RateLimitError", "anthropic._exceptions")
OpenAIConnection = _foreign("APIConnectionError", "openai._exceptions")
OpenAITimeout = _foreign("APITimeoutError", "openai._exceptions", OpenAIConnection)
AnthropicServerError = _foreign("InternalServerError", "anthropic._exceptions")
HttpxLookalike = _foreign("ReadTimeout", "httpxtra")  # not httpx: a prefix is not enough


def _httpx_status_error(status_code: int) -> Exception:
    error = _foreign("HTTPStatusError", "httpx._exceptions")("bad status")
    error.response = _Response(status_code)  # type: ignore[attr-defined]
    return error


def _context(*recent: tuple[str, Any, str], **facts: Any) -> dict[str, Any]:
    return {"phase": "implement", "component_id": "c3", "recent_errors": list(recent), **facts}


def test_error_classification_is_the_wire_enum() -> None:
    assert ErrorClassification is ErrorClass


def test_classify_timeout_as_transient() -> None:
    # The seed names asyncio.TimeoutError; since 3.11 it is the builtin, which is the point.
    assert classify_error(asyncio.TimeoutError()) is ErrorClass.TRANSIENT  # noqa: UP041


def test_classify_budget_as_permanent() -> None:
    error = BudgetExceededError("total budget $50.00 spent ($50.12)")
    assert classify_error(error) is ErrorClass.PERMANENT


def test_classify_repeated_same_error_as_systemic() -> None:
    error = FileNotFoundError("pytest")
    assert classify_error(error) is ErrorClass.PERMANENT
    context = _context(
        ("c1", "implement", "FileNotFoundError"), ("c2", "implement", "FileNotFoundError")
    )
    assert classify_error(error, context) is ErrorClass.SYSTEMIC


@pytest.mark.parametrize(
    "error",
    [
        TimeoutError("read timed out"),
        ConnectionError("connection lost"),
        ConnectionResetError(errno.ECONNRESET, "reset by peer"),
        OSError(errno.ECONNREFUSED, "refused"),
        OSError(errno.ETIMEDOUT, "timed out"),
        OSError(errno.EHOSTUNREACH, "no route to host"),
        OSError(errno.ENETUNREACH, "network is unreachable"),
        socket.gaierror(socket.EAI_AGAIN, "temporary failure in name resolution"),
        TransientAgentError("rate limited"),
        SandboxTimeout("killed after 300s"),
        HttpxReadTimeout("read timeout"),
        HttpcoreConnectError("connect failed"),
        AnthropicRateLimit("429"),
        OpenAITimeout("timeout"),
        AnthropicServerError("500"),
        _StatusError(429),
        _StatusError(503),
        _StatusError(529),
        _httpx_status_error(502),
    ],
    ids=repr,
)
def test_network_timeouts_and_provider_outages_are_transient(error: Exception) -> None:
    assert classify_error(error) is ErrorClass.TRANSIENT


@pytest.mark.parametrize(
    "error",
    [
        ValueError("bad contract"),
        FileNotFoundError("interface.json"),
        InputError("bad tree"),
        SettingsError("pact.yaml: unknown key 'foo'"),
        PermanentAgentError("the agent refused"),
        VerificationError("tests failed"),
        BudgetExceededError("spent"),
        RuntimeError("something nobody anticipated"),
        OSError(errno.ENOSPC, "no space left on device"),
        HttpxLookalike("not really httpx"),
        _StatusError(401),
        _httpx_status_error(404),  # the 4xx rule wins over "httpx.* is transient"
    ],
    ids=repr,
)
def test_bad_input_and_unknown_errors_are_permanent(error: Exception) -> None:
    assert classify_error(error) is ErrorClass.PERMANENT


def test_environment_spec_error_is_systemic_although_it_is_an_oserror() -> None:
    error = EnvironmentSpecError("required tools not found on PATH: pytest")
    assert isinstance(error, OSError)
    assert classify_error(error) is ErrorClass.SYSTEMIC


def test_an_unreachable_provider_is_transient() -> None:
    error = ProviderUnreachable("api.example.test:443", "ConnectError: refused")
    assert isinstance(error, TransientAgentError)
    assert classify_error(error) is ErrorClass.TRANSIENT


@pytest.mark.parametrize(
    "error",
    [
        redis.exceptions.ConnectionError("Error 111 connecting to redis:6379. Connection refused."),
        redis.exceptions.TimeoutError("Timeout reading from socket"),
        redis.exceptions.BusyLoadingError("Redis is loading the dataset in memory"),
        redis.exceptions.TryAgainError("TRYAGAIN"),
        BrokerUnavailable("Redis at redis://redis:6379/0 did not answer within 30 s"),
    ],
    ids=repr,
)
def test_a_redis_that_is_down_or_restarting_is_transient(error: Exception) -> None:
    """A worker that loses Redis mid-attempt (the artifact store) has done nothing wrong:
    the attempt is retried, it does not fail for good."""
    assert classify_error(error) is ErrorClass.TRANSIENT


@pytest.mark.parametrize(
    "error",
    [
        redis.exceptions.AuthenticationError("invalid username-password pair"),
        redis.exceptions.AuthorizationError("NOAUTH"),
        redis.exceptions.NoPermissionError("this user has no permissions to run 'set'"),
        BrokerAuthError("Redis refused the credentials"),
    ],
    ids=repr,
)
def test_credentials_redis_refuses_are_systemic(error: Exception) -> None:
    """redis-py's AuthenticationError is a ConnectionError; it must not be retried."""
    assert classify_error(error) is ErrorClass.SYSTEMIC


def test_other_redis_errors_stay_permanent() -> None:
    assert classify_error(redis.exceptions.ResponseError("WRONGTYPE")) is ErrorClass.PERMANENT


def test_a_generic_wrapper_is_classified_by_its_cause() -> None:
    try:
        try:
            raise HttpxReadTimeout("read timeout")
        except Exception as exc:
            raise AgentError("the agent call failed") from exc
    except AgentError as wrapped:
        assert classify_error(wrapped) is ErrorClass.TRANSIENT


def test_an_explicit_outer_class_beats_its_cause() -> None:
    error = PermanentAgentError("gave up")
    error.__cause__ = TimeoutError()
    assert classify_error(error) is ErrorClass.PERMANENT


def test_repetition_counts_distinct_components_only() -> None:
    context = _context(
        ("c3", "implement", "FileNotFoundError"), ("c3", "implement", "FileNotFoundError")
    )
    assert classify_error(FileNotFoundError(), context) is ErrorClass.PERMANENT


def test_repetition_needs_the_same_phase_and_the_same_type() -> None:
    context = _context(("c1", "test", "FileNotFoundError"), ("c2", "implement", "ValueError"))
    assert classify_error(FileNotFoundError(), context) is ErrorClass.PERMANENT


def test_repetition_escalates_transient_errors_too() -> None:
    context = _context(
        ("c1", "implement", "ConnectionError"), ("c2", "implement", "ConnectionError")
    )
    assert classify_error(ConnectionError(), context) is ErrorClass.SYSTEMIC


def test_repetition_matches_a_phase_member_with_its_value() -> None:
    context = _context(
        ("c1", Phase.IMPLEMENT, "ValueError"),
        ("c2", "implement", "ValueError"),
        phase=Phase.IMPLEMENT,
    )
    assert classify_error(ValueError(), context) is ErrorClass.SYSTEMIC


def test_repetition_honours_a_custom_threshold() -> None:
    context = _context(("c1", "implement", "ValueError"), threshold=2)
    assert classify_error(ValueError(), context) is ErrorClass.SYSTEMIC
    context = _context(
        ("c1", "implement", "ValueError"), ("c2", "implement", "ValueError"), threshold=4
    )
    assert classify_error(ValueError(), context) is ErrorClass.PERMANENT


def test_repetition_without_a_phase_is_off() -> None:
    context = _context(("c1", None, "ValueError"), ("c2", None, "ValueError"))
    del context["phase"]
    assert classify_error(ValueError(), context) is ErrorClass.PERMANENT


def test_without_the_current_component_only_recent_errors_count() -> None:
    recent = [("c1", "implement", "ValueError"), ("c2", "implement", "ValueError")]
    context = {"phase": "implement", "recent_errors": recent}
    assert classify_error(ValueError(), context) is ErrorClass.PERMANENT
    recent.append(("c3", "implement", "ValueError"))
    assert classify_error(ValueError(), context) is ErrorClass.SYSTEMIC


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (AnthropicRateLimit("429"), ErrorClass.TRANSIENT),
        (BudgetExceededError("spent"), ErrorClass.PERMANENT),
        (VerificationError("tests failed"), ErrorClass.PERMANENT),
    ],
    ids=repr,
)
def test_errors_that_many_components_hit_normally_are_not_escalated(
    error: Exception, expected: ErrorClass
) -> None:
    name = type(error).__name__
    context = _context(
        ("c1", "implement", name), ("c2", "implement", name), ("c4", "implement", name)
    )
    assert classify_error(error, context) is expected


def test_empty_context_is_the_same_as_none() -> None:
    assert classify_error(ValueError(), {}) is ErrorClass.PERMANENT


def test_not_an_exception_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="needs an exception"):
        classify_error("boom")  # type: ignore[arg-type]


@pytest.mark.parametrize("threshold", [0, -1, "3", 2.5, True])
def test_a_bad_threshold_is_rejected(threshold: object) -> None:
    with pytest.raises(ValueError, match="threshold"):
        classify_error(ValueError(), _context(threshold=threshold))


@pytest.mark.parametrize("entry", [("c1", "implement"), "c1/implement/ValueError", None])
def test_a_malformed_recent_error_is_rejected(entry: object) -> None:
    context = _context()
    context["recent_errors"] = [entry]
    with pytest.raises(ValueError, match="triples"):
        classify_error(ValueError(), context)


def test_error_signature_masks_numbers_and_addresses() -> None:
    first = error_signature(TimeoutError("read timed out after 30s on port 8443"))
    second = error_signature(TimeoutError("read timed out after 45s on port 9000"))
    assert first == second == "TimeoutError: read timed out after Ns on port N"
    assert error_signature(ValueError("bad <Obj at 0x7f3a2b>")) == "ValueError: bad <Obj at ADDR>"


def test_error_signature_keeps_only_the_first_line() -> None:
    error = ValueError("first line\n  Traceback noise 123")
    assert error_signature(error) == "ValueError: first line"


def test_error_signature_of_an_empty_message_is_the_type_name() -> None:
    assert error_signature(ConnectionError()) == "ConnectionError"
