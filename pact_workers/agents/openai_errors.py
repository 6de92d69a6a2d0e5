"""The OpenAI backend's failures, mapped to the project's errors for the scheduler.

408, 409, 429, 5xx, an error event inside a stream and connection failures are
:class:`Retryable`: the backend retries them itself, then reports a TransientAgentError
(ProviderUnreachable when the last failure was ``unreachable``: no answer at all).
A stream that sends nothing for the idle timeout is a TransientAgentError at once (the
scheduler backs off). A bad request (a prompt over the context length included) is a
PermanentAgentError; a rejected key, a missing permission, an unknown model or an
exhausted quota is a SystemicAgentError. The API key never appears in a message, nor in
the SDK error chained to ours (a server may echo it).
"""

from __future__ import annotations

import re
from typing import Protocol

import openai

from pact_workers.backoff import retry_after_s
from pact_workers.errors import (
    AgentError,
    PermanentAgentError,
    SystemicAgentError,
    TransientAgentError,
)

__all__ = ["RETRY_STATUSES", "CallSettings", "Retryable", "redact", "scrubbed", "translate"]

#: HTTP statuses worth asking again (the SDK's own retry set).
RETRY_STATUSES = frozenset({408, 409, 429})
#: Sent as the key to a loopback server when no key is set (most local servers want none,
#: and the SDK refuses to send a request without one).
LOCAL_PLACEHOLDER_KEY = "pact-local-no-key"

_SECRET_LIKE = re.compile(r"\b(?:sk|pk|rk)-[A-Za-z0-9_\-*.]{6,}")


class Retryable(TransientAgentError):
    """A failure this backend retries itself before it reports a TransientAgentError.

    ``unreachable``: the server gave no answer at all (refused, reset, DNS, connect or
    TLS failure), so that the report after the last retry is a ProviderUnreachable.
    """

    def __init__(
        self, message: str, *, retry_after_s: float | None = None, unreachable: bool = False
    ) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s
        self.unreachable = unreachable


class CallSettings(Protocol):
    """What a message about a failed call names (the backend's settings)."""

    model: str
    api_key_env: str
    stream: bool
    idle_timeout_s: float
    request_timeout_s: float

    def where(self) -> str:
        """``openai model 'm' at URL``: which server and model failed."""
        ...


def translate(exc: openai.OpenAIError, call: CallSettings, key: str | None) -> AgentError:
    """The project's error for one failed request (``Retryable`` when worth another try)."""
    where = call.where()
    if isinstance(exc, openai.APIStatusError):
        return _status_error(exc, call, key)
    if isinstance(exc, openai.APITimeoutError):
        if _cause_name(exc) in {"ConnectTimeout", "PoolTimeout"}:
            # A full connection pool is a local limit, not an unreachable server.
            unreachable = _cause_name(exc) == "ConnectTimeout"
            return Retryable(f"{where}: cannot connect (timed out)", unreachable=unreachable)
        waited = call.idle_timeout_s if call.stream else call.request_timeout_s
        what = "stream sent nothing" if call.stream else "answer did not arrive"
        setting = "idle_timeout_s" if call.stream else "timeout_s"
        return TransientAgentError(
            f"{where}: the {what} for {waited:g} s ({setting}); abandoned it"
        )
    if isinstance(exc, openai.APIConnectionError):
        # The SDK raises it only when no response came: every such failure is one.
        reason = redact(_cause_text(exc), key) or "connection error"
        return Retryable(f"{where}: cannot reach the server ({reason})", unreachable=True)
    if isinstance(exc, openai.APIError):  # an error event inside a stream: no status code
        return Retryable(f"{where}: the stream reported an error: {redact(str(exc), key)}")
    return PermanentAgentError(f"{where}: {redact(str(exc), key)}")


def _status_error(exc: openai.APIStatusError, call: CallSettings, key: str | None) -> AgentError:
    """The project's error for an HTTP error status (retried when ``Retryable``)."""
    status = exc.status_code
    code = exc.code or ""
    detail = f"HTTP {status}{f' {code}' if code else ''}: {_error_message(exc, key)}"
    where = call.where()
    if status == 429 and code == "insufficient_quota":
        return SystemicAgentError(
            f"{where}: the account has no quota left ({detail}); add credit or use "
            "another key or model"
        )
    if status in RETRY_STATUSES or status >= 500:
        return Retryable(f"{where}: {detail}", retry_after_s=retry_after_s(exc.response.headers))
    if status == 401:
        return SystemicAgentError(
            f"{where}: the server rejected the API key from ${call.api_key_env} ({detail}); "
            f"set a valid key in {call.api_key_env} (or name another variable with "
            "api_key_env in pact.yaml)"
        )
    if status == 403:
        return SystemicAgentError(
            f"{where}: the key from ${call.api_key_env} may not use this model or endpoint "
            f"({detail}); grant access or choose another model in pact.yaml"
        )
    if status == 404:
        return SystemicAgentError(
            f"{where}: model {call.model!r} or the chat completions endpoint does not exist "
            f"there ({detail}); check model and base_url under agents: in pact.yaml"
        )
    text = detail.lower()
    if code == "context_length_exceeded" or re.search(r"context[ _]length", text):
        return PermanentAgentError(
            f"{where}: the prompt does not fit the model's context ({detail}); use a model "
            "with a longer context, a smaller max_tokens or a smaller component"
        )
    return PermanentAgentError(f"{where}: the server refused the request ({detail})")


def redact(text: str, key: str | None) -> str:
    """``text`` with the key, and anything shaped like a key, replaced."""
    if key and key != LOCAL_PLACEHOLDER_KEY and len(key) >= 4:
        text = text.replace(key, "[redacted]")
    return _SECRET_LIKE.sub("[redacted]", text)


def scrubbed(exc: openai.OpenAIError, key: str | None) -> openai.OpenAIError:
    """``exc`` with the key taken out of its message and body (a server may echo it):
    it is chained to the error we raise, so tracebacks and logs print it."""
    exc.args = tuple(redact(a, key) if isinstance(a, str) else a for a in exc.args)
    if isinstance(exc, openai.APIError):
        exc.message = redact(exc.message, key)
        if isinstance(exc.body, dict) and isinstance(exc.body.get("message"), str):
            exc.body = {**exc.body, "message": redact(exc.body["message"], key)}
    return exc


def _error_message(exc: openai.APIStatusError, key: str | None) -> str:
    """The server's own words: the ``message`` of its error object, else the SDK's."""
    body = exc.body
    message = body.get("message") if isinstance(body, dict) else None
    return redact(message if isinstance(message, str) and message else exc.message, key)


def _cause_text(exc: BaseException) -> str:
    """``Name: message`` of the transport error behind ``exc`` (empty without one)."""
    cause = exc.__cause__
    if cause is None:
        return ""
    text = str(cause).strip()
    return f"{type(cause).__name__}: {text}" if text else type(cause).__name__


def _cause_name(exc: BaseException) -> str:
    return type(exc.__cause__).__name__ if exc.__cause__ is not None else ""
