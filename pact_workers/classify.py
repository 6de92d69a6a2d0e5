"""Error classification: is a failure worth retrying, final, or a sign of a broken environment?

:func:`classify_error` is a pure policy (seed 000, 1.2). It returns an
:class:`ErrorClass`; the scheduler's failure policy decides what to do with it:

- TRANSIENT (network, timeouts, rate limits, provider outages, a Redis that is down or
  restarting): retry with backoff.
- PERMANENT (bad input, budget exhausted, rejected output, anything unknown): stop the item.
- SYSTEMIC (the environment is broken, or the same error hits many components):
  pause the run for a human.
"""

from __future__ import annotations

import errno
import re
import socket
from collections.abc import Mapping, Sequence
from typing import Any

from pact_workers.errors import (
    BrokerAuthError,
    BrokerUnavailable,
    BudgetExceededError,
    EnvironmentSpecError,
    InputError,
    PermanentAgentError,
    SandboxImageMissing,
    SandboxTimeout,
    SandboxUnavailable,
    SystemicAgentError,
    TransientAgentError,
    VerificationError,
)
from pact_workers.models.work import ErrorClass

__all__ = [
    "DEFAULT_SYSTEMIC_THRESHOLD",
    "ErrorClassification",
    "classify_error",
    "error_signature",
]

#: The seed's name for the classification; the enum itself lives with the wire models.
ErrorClassification = ErrorClass

#: Components that must fail alike in one phase before a repeated error is systemic.
DEFAULT_SYSTEMIC_THRESHOLD = 3

#: OS error numbers of a network that may come back. Python maps some of them to
#: ConnectionError/TimeoutError subclasses already; the unreachable ones it does not.
NETWORK_ERRNOS = frozenset(
    {
        errno.ECONNRESET,
        errno.ECONNREFUSED,
        errno.ECONNABORTED,
        errno.ETIMEDOUT,
        errno.EHOSTUNREACH,
        errno.EHOSTDOWN,
        errno.ENETUNREACH,
        errno.ENETDOWN,
    }
)

#: HTTP libraries whose every exception is a transport problem (seed: ``httpx.* -> TRANSIENT``).
TRANSIENT_MODULES = ("httpx", "httpcore", "httpx2", "httpcore2")

#: Provider SDK exceptions (anthropic, openai) that a later call may not hit; matched by
#: name so that the SDKs stay optional.
TRANSIENT_NAMES = frozenset(
    {"RateLimitError", "APITimeoutError", "APIConnectionError", "InternalServerError"}
)

#: redis-py errors (matched by name, so that embedded runs need no redis) of a Redis that
#: is down, restarting, loading or failing over: a worker that meets one mid-attempt has
#: done nothing wrong, and the attempt may succeed once Redis is back.
REDIS_TRANSIENT_NAMES = frozenset(
    {"ConnectionError", "TimeoutError", "BusyLoadingError", "TryAgainError", "ClusterDownError"}
)
#: redis-py errors of credentials or an ACL Redis refuses: the same for every component
#: (some are ConnectionError subclasses, so they are matched first).
REDIS_SYSTEMIC_NAMES = frozenset(
    {
        "AuthenticationError",
        "AuthorizationError",
        "ExternalAuthProviderError",
        "AuthenticationWrongNumberOfArgsError",
        "NoPermissionError",
    }
)

#: HTTP statuses that say "try again later"; every other 4xx says "this request is wrong".
TRANSIENT_STATUSES = frozenset({408, 425, 429})

#: Error types that many components may hit at once without the environment being at
#: fault, so the repetition rule leaves them alone:
#: - a spent budget is already a stop decision of its own;
#: - the harness rejecting outputs is per-component by nature (identical test failures
#:   are recognised from the test results by ``scheduler.systemic`` instead);
#: - a wide fan-out hits a provider's rate limit on many components at once, and
#:   backing off is the cure, not a human.
NOT_SYSTEMIC_WHEN_REPEATED = frozenset(
    {BudgetExceededError.__name__, VerificationError.__name__, "RateLimitError"}
)

_PERMANENT_TYPES: tuple[type[BaseException], ...] = (
    BudgetExceededError,
    InputError,
    PermanentAgentError,
    VerificationError,
    SandboxImageMissing,  # permanent for that environment until the image is built
    ValueError,
    FileNotFoundError,
)
_TRANSIENT_TYPES: tuple[type[BaseException], ...] = (
    TransientAgentError,
    BrokerUnavailable,
    SandboxTimeout,
    TimeoutError,  # asyncio.TimeoutError is this class since 3.11
    ConnectionError,
)

#: How far to follow ``raise X from Y`` when the outer error says nothing by itself.
_MAX_CAUSE_DEPTH = 5

_ADDRESS = re.compile(r"0x[0-9a-fA-F]+")
_DIGITS = re.compile(r"\d+")


def classify_error(error: BaseException, context: Mapping[str, Any] | None = None) -> ErrorClass:
    """Classify an error for the retry / stop / escalate decision.

    The type of the error decides first (see the module constants); an error that
    matches no rule is PERMANENT, because retrying what we do not understand wastes
    money. Then the repetition rule may escalate it to SYSTEMIC: when the same error
    type has hit ``threshold`` or more different components in the same phase, the
    cause is almost certainly shared (a missing tool, a dead provider), not the
    component.

    Args:
        error: The exception an attempt failed with.
        context: Optional facts about the attempt:
            ``component_id`` (str) the component that failed now;
            ``phase`` (str) its phase — without it the repetition rule is off,
            because "the same phase" cannot be established;
            ``recent_errors`` a sequence of ``(component_id, phase, error_type_name)``
            tuples of earlier failures (the caller chooses the window);
            ``threshold`` (int, default 3) distinct components that make a pattern.

    Returns:
        TRANSIENT, PERMANENT or SYSTEMIC.

    Raises:
        TypeError: ``error`` is not an exception.
        ValueError: ``threshold`` is not a positive integer or a ``recent_errors``
            entry is not a ``(component_id, phase, error_type_name)`` triple.
    """
    if not isinstance(error, BaseException):
        raise TypeError(f"classify_error needs an exception, got {type(error).__name__}")
    base = _classify_type(error)
    if base is ErrorClass.SYSTEMIC or not context:
        return base
    if type(error).__name__ in NOT_SYSTEMIC_WHEN_REPEATED:
        return base
    if _repeated_across_components(type(error).__name__, context):
        return ErrorClass.SYSTEMIC
    return base


def error_signature(error: BaseException) -> str:
    """A short key under which "the same error" on different components compares equal.

    The type name and the first line of the message, with memory addresses and
    numbers (ports, line numbers, durations) masked so that incidental detail does
    not split one cause into many.

    Example: ``TimeoutError('read timed out after 30s')`` -> ``"TimeoutError: read timed
    out after Ns"``.
    """
    lines = str(error).strip().splitlines()
    first = lines[0].strip() if lines else ""
    first = _DIGITS.sub("N", _ADDRESS.sub("ADDR", first))
    name = type(error).__name__
    return f"{name}: {first}" if first else name


def _classify_type(error: BaseException) -> ErrorClass:
    """The classification that the error's type (or, failing that, its cause) implies."""
    current: BaseException | None = error
    for _ in range(_MAX_CAUSE_DEPTH):
        if current is None:
            break
        verdict = _classify_one(current)
        if verdict is not None:
            return verdict
        # An adapter that wraps a library error in a generic one (``raise AgentError(...)
        # from exc``) keeps the real reason in ``__cause__``.
        current = current.__cause__
    return ErrorClass.PERMANENT


def _classify_one(error: BaseException) -> ErrorClass | None:
    """One exception's verdict, or None when its type says nothing."""
    # Before the OSError rules: EnvironmentSpecError is an EnvironmentError (= OSError).
    if isinstance(
        error, EnvironmentSpecError | SandboxUnavailable | SystemicAgentError | BrokerAuthError
    ):
        return ErrorClass.SYSTEMIC
    if _redis_error_named(error, REDIS_SYSTEMIC_NAMES):
        return ErrorClass.SYSTEMIC
    if _redis_error_named(error, REDIS_TRANSIENT_NAMES):
        return ErrorClass.TRANSIENT
    if isinstance(error, _PERMANENT_TYPES):
        return ErrorClass.PERMANENT
    status = _http_status(error)
    if status is not None:
        if status in TRANSIENT_STATUSES or status >= 500:
            return ErrorClass.TRANSIENT
        if 400 <= status < 500:
            # Bad request, bad key, unknown model: the same call fails the same way.
            return ErrorClass.PERMANENT
    if isinstance(error, _TRANSIENT_TYPES):
        return ErrorClass.TRANSIENT
    if isinstance(error, OSError) and error.errno in NETWORK_ERRNOS:
        return ErrorClass.TRANSIENT
    if isinstance(error, socket.gaierror) and error.errno == socket.EAI_AGAIN:
        return ErrorClass.TRANSIENT  # "temporary failure in name resolution"
    for cls in type(error).__mro__:
        if cls.__name__ in TRANSIENT_NAMES or _in_modules(cls.__module__, TRANSIENT_MODULES):
            return ErrorClass.TRANSIENT
    return None


def _http_status(error: BaseException) -> int | None:
    """The HTTP status an SDK error carries, if any (duck-typed: the SDKs are optional)."""
    status = _attribute(error, "status_code")
    if status is None:
        # httpx.HTTPStatusError keeps it on the response.
        status = _attribute(_attribute(error, "response"), "status_code")
    if isinstance(status, int) and not isinstance(status, bool) and 100 <= status <= 599:
        return status
    return None


def _attribute(obj: object, name: str) -> object:
    """``getattr`` that never raises: some SDK properties raise when unset (httpx's ``request``)."""
    try:
        return getattr(obj, name, None)
    except Exception:
        return None


def _redis_error_named(error: BaseException, names: frozenset[str]) -> bool:
    """Whether ``error`` is a redis-py exception of one of ``names`` (or a subclass)."""
    return any(
        cls.__name__ in names and _in_modules(cls.__module__, ("redis",))
        for cls in type(error).__mro__
    )


def _in_modules(module: str, prefixes: Sequence[str]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in prefixes)


def _repeated_across_components(type_name: str, context: Mapping[str, Any]) -> bool:
    """True when ``type_name`` failed on ``threshold``+ distinct components in this phase."""
    threshold = context.get("threshold", DEFAULT_SYSTEMIC_THRESHOLD)
    if not isinstance(threshold, int) or isinstance(threshold, bool) or threshold < 1:
        raise ValueError(f"context['threshold'] must be a positive integer, got {threshold!r}")
    phase = context.get("phase")
    if phase is None:
        return False
    components: set[str] = set()
    current = context.get("component_id")
    if current is not None:
        components.add(str(current))
    for entry in context.get("recent_errors") or ():
        if isinstance(entry, str | bytes) or not isinstance(entry, Sequence) or len(entry) != 3:
            raise ValueError(
                "context['recent_errors'] entries must be (component_id, phase, "
                f"error_type_name) triples, got {entry!r}"
            )
        component_id, entry_phase, entry_type = entry
        # str() so that a Phase member and its plain value compare equal.
        if entry_type == type_name and str(entry_phase) == str(phase):
            components.add(str(component_id))
    return len(components) >= threshold
