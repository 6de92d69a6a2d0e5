"""The Anthropic backend's failures, mapped to the project's errors for the scheduler.

408, 409, 429, 5xx (529 overloaded included), an error event in the stream and
connection failures are worth another try (:func:`retryable`); the backend retries them
and then raises TransientAgentError, or ProviderUnreachable when no answer came at all
(:func:`is_unreachable`: refused, reset, DNS, connect or TLS failure). A stream that
went silent for the idle timeout is reported at once (:func:`is_idle`), transient too.
A bad request (400 and the other 4xx, a prompt too long) is a PermanentAgentError; a
bad or missing key, no access, an unknown model, a spent account (401, 402, 403, 404,
spend limits) a SystemicAgentError. No message ever holds the API key.
"""

from __future__ import annotations

from typing import Protocol

import anthropic
import httpx2

from pact_workers.agents.anthropic_reply import IncompleteStream
from pact_workers.errors import (
    AgentError,
    PermanentAgentError,
    ProviderUnreachable,
    SystemicAgentError,
    TransientAgentError,
)
from pact_workers.models.work import Role

__all__ = [
    "RETRY_ERROR_TYPES",
    "RETRY_STATUSES",
    "SPEND_LIMIT_CODES",
    "SYSTEMIC_ERROR_TYPES",
    "SYSTEMIC_STATUSES",
    "CallSettings",
    "describe",
    "is_idle",
    "is_unreachable",
    "retryable",
    "translate",
]

#: Statuses worth another try: request timeout, lock timeout, rate limit; and >= 500.
RETRY_STATUSES = frozenset({408, 409, 429})
#: Statuses no component gets past until someone fixes the configuration or the account.
SYSTEMIC_STATUSES = frozenset({401, 402, 403, 404})
#: Error types of an ``error`` event inside a 200 stream, which has no status of its own.
RETRY_ERROR_TYPES = frozenset(
    {"rate_limit_error", "overloaded_error", "api_error", "timeout_error"}
)
SYSTEMIC_ERROR_TYPES = frozenset(
    {"authentication_error", "permission_error", "not_found_error", "billing_error"}
)
#: 402/429 causes that waiting does not cure: a person has to raise a limit or pay.
SPEND_LIMIT_CODES = frozenset(
    {
        "contract_spend_limit_reached",
        "enforced_spend_limit_reached",
        "linked_organization_spend_limit_reached",
        "linked_organization_billing_unavailable",
    }
)


class CallSettings(Protocol):
    """What a message about a failed call names (the backend's settings)."""

    model: str
    api_key_env: str
    base_url: str | None
    max_tokens: int
    max_retries: int
    idle_timeout_s: float

    def endpoint(self) -> str:
        """``host:port`` the calls go to."""
        ...


def retryable(exc: BaseException) -> bool:
    """Worth another try now: a rate limit, an overload, a server or connection failure."""
    if is_idle(exc):
        return False  # the scheduler decides what a stalled call deserves
    if isinstance(exc, anthropic.APIStatusError):
        if exc.error_code in SPEND_LIMIT_CODES:
            return False
        if exc.status_code < 400:  # an error event inside a stream
            return exc.type in RETRY_ERROR_TYPES
        return exc.status_code in RETRY_STATUSES or exc.status_code >= 500
    # APITimeoutError is an APIConnectionError; httpx2 errors escape the SDK mid-stream.
    return isinstance(exc, anthropic.APIConnectionError | httpx2.TransportError | IncompleteStream)


def is_idle(exc: BaseException) -> bool:
    """The API sent nothing for the read timeout (the idle timeout)."""
    if isinstance(exc, httpx2.ReadTimeout):
        return True  # mid-stream: the SDK lets httpx's error through
    return isinstance(exc, anthropic.APITimeoutError) and isinstance(
        exc.__cause__, httpx2.ReadTimeout
    )


def is_unreachable(exc: BaseException) -> bool:
    """No answer at all: the connection was refused or reset, the name did not resolve,
    the connection or the TLS handshake failed or timed out, before the API said anything.

    The SDK raises APIConnectionError (APITimeoutError included) only for failures before
    a response; a stream that breaks later escapes as a raw transport error and is not
    counted here, nor is a full connection pool (a local limit).
    """
    if is_idle(exc):
        return False
    if isinstance(exc, anthropic.APIConnectionError):
        return not isinstance(exc.__cause__, httpx2.PoolTimeout)
    return isinstance(exc, httpx2.ConnectError | httpx2.ConnectTimeout)


def describe(exc: BaseException, secret: str) -> str:
    """A one-line account of a failure, with ``secret`` (the API key) scrubbed out."""
    if isinstance(exc, anthropic.APIStatusError):
        kind = exc.type or "error"
        detail = exc.api_message or exc.message
        text = (
            f"HTTP {exc.status_code} {kind}: {detail}"
            if exc.status_code >= 400
            else f"{kind} in the stream: {detail}"
        )
    elif isinstance(exc, anthropic.APIConnectionError) and exc.__cause__ is not None:
        text = f"{exc.message} ({type(exc.__cause__).__name__}: {exc.__cause__})"
    else:
        text = f"{type(exc).__name__}: {exc}"
    return _scrub(text.strip(), secret)


def translate(exc: BaseException, role: Role, call: CallSettings, secret: str) -> AgentError:
    """The project's error for an SDK failure that will not be retried here (any more)."""
    what = describe(exc, secret)
    if is_idle(exc):
        return TransientAgentError(
            f"stream idle for {call.idle_timeout_s:g} s: no data from the Anthropic API "
            f"({call.model}); the call was abandoned"
        )
    if retryable(exc):
        attempts = call.max_retries + 1
        gave_up = f"gave up after {attempts} attempt{'s' * (attempts > 1)}"
        if is_unreachable(exc):
            return ProviderUnreachable(
                call.endpoint(), f"anthropic API: {_transport_reason(exc, secret)}; {gave_up}"
            )
        return TransientAgentError(f"anthropic: {what}; {gave_up}")
    if not isinstance(exc, anthropic.APIStatusError):
        return PermanentAgentError(f"anthropic: {what}")
    status, error_type = exc.status_code, exc.type
    if exc.error_code in SPEND_LIMIT_CODES:
        return SystemicAgentError(
            f"anthropic: {what}; the account cannot spend more until someone raises the limit"
        )
    if status == 401 or error_type == "authentication_error":
        return SystemicAgentError(
            f"anthropic: the API refused the key in {call.api_key_env} ({what}); set a "
            f"valid key in {call.api_key_env}"
        )
    if status == 403 or error_type == "permission_error":
        return SystemicAgentError(
            f"anthropic: the key in {call.api_key_env} has no access to {call.model} ({what})"
        )
    if status == 404 or error_type == "not_found_error":
        return SystemicAgentError(
            f"anthropic: unknown model {call.model!r} or wrong base_url "
            f"{call.base_url or 'default'} ({what}); fix the model in pact.yaml"
        )
    if status in SYSTEMIC_STATUSES or error_type in SYSTEMIC_ERROR_TYPES:
        return SystemicAgentError(f"anthropic: {what}; check the account's billing")
    message = (exc.api_message or "").lower()
    if "prompt is too long" in message or ("context" in message and "limit" in message):
        return PermanentAgentError(
            f"anthropic: the {role.value} prompt is too long for {call.model} ({what}); "
            "give the component less context or split it"
        )
    if "max_tokens" in message:
        return PermanentAgentError(
            f"anthropic: max_tokens {call.max_tokens} is not allowed for {call.model} "
            f"({what}); lower max_tokens for this role in pact.yaml"
        )
    return PermanentAgentError(f"anthropic: the API rejected the request ({what})")


def _transport_reason(exc: BaseException, secret: str) -> str:
    """What the transport said (``ConnectError: [Errno 111] Connection refused``)."""
    cause = exc.__cause__ if isinstance(exc, anthropic.APIConnectionError) else exc
    if cause is None:
        return _scrub(str(exc), secret)
    text = str(cause).strip()
    name = type(cause).__name__
    return _scrub(f"{name}: {text}" if text else name, secret)


def _scrub(text: str, secret: str) -> str:
    return text.replace(secret, "[redacted]") if secret else text
