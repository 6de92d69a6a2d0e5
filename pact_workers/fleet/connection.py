"""Redis connections that survive a Redis restart: URL checks, retries, readiness.

Every pact-fleet process talks to Redis through :func:`redis_from_url`. Its client
retries a command that failed on a connection error or timeout (a restarting or
loading server) with exponential backoff and jitter, for a bounded total time; a
wrong password is not retried. Password, database and TLS come from the URL alone
(``redis://:PASSWORD@host:6379/0``, ``rediss://`` for TLS, ``unix:///path.sock``).
"""

from __future__ import annotations

import contextlib
import math
import re
import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar
from urllib.parse import parse_qs, urlsplit

import redis
from redis.backoff import EqualJitterBackoff
from redis.exceptions import (
    AuthenticationError,
    AuthorizationError,
    ConnectionError,
    ExternalAuthProviderError,
    RedisError,
    TimeoutError,
)
from redis.retry import Retry

from pact_workers.errors import BrokerAuthError, BrokerUnavailable, SettingsError

__all__ = [
    "BrokerAuthError",
    "BrokerUnavailable",
    "check_redis_url",
    "describe",
    "redact",
    "redis_from_url",
    "retry_deadline",
    "wait_for_redis",
]

T = TypeVar("T")

#: What a valid URL looks like, for error messages.
URL_FORMS = (
    "redis://[[user]:password@]host[:port][/db], "
    "rediss://... (the same, over TLS) or unix://[[user]:password@]/path/to/redis.sock[?db=N]"
)
SCHEMES = ("redis", "rediss", "unix")
#: The highest database number Redis parses (``SELECT`` takes a signed 32-bit number);
#: a server has ``databases`` of them (16 by default: 0 to 15).
MAX_DB = 2**31 - 1

#: Backoff between retries: base * 2**failures, capped, half of it random so that a
#: fleet reconnecting after a Redis restart does not arrive all at once.
RETRY_BASE_S = 0.05
RETRY_CAP_S = 1.0
#: How often an idle pooled connection is PINGed before it is reused, so that a
#: connection a restarted server dropped is noticed before a command is sent on it.
HEALTH_CHECK_INTERVAL_S = 10
SOCKET_CONNECT_TIMEOUT_S = 5.0
#: Must exceed the longest blocking read (XREADGROUP BLOCK); ResultStream clamps its
#: block time below the client's socket timeout.
SOCKET_TIMEOUT_S = 15.0

#: Connection errors that another attempt cannot fix.
NOT_RETRYABLE = (AuthenticationError, AuthorizationError, ExternalAuthProviderError)


# ---------------------------------------------------------------------------- URLs


def redact(url: str) -> str:
    """Return ``url`` with its password replaced by ``***``, for logs and errors.

    Works on malformed URLs too: everything between the user name and the last ``@``
    is hidden, so a password containing ``/``, ``?`` or ``@`` does not leak.
    """
    scheme, sep, rest = url.partition("://")
    if not sep:
        scheme, rest = "", url
    at = rest.rfind("@")
    if at < 0:
        return url
    user, colon, _password = rest[:at].partition(":")
    userinfo = f"{user}:***" if colon else user
    return f"{scheme}{sep}{userinfo}@{rest[at + 1 :]}"


def check_redis_url(url: str) -> str:
    """Validate a Redis URL and return it (stripped of surrounding whitespace).

    Raises:
        SettingsError: the scheme is not redis, rediss or unix, or the host, port,
            socket path or database is missing or malformed. The message shows the
            URL with its password redacted and the forms a valid URL takes.
    """
    url = url.strip()

    def bad(problem: str) -> SettingsError:
        return SettingsError(f"invalid Redis URL {redact(url)!r}: {problem}; use {URL_FORMS}")

    if not url:
        raise bad("it is empty")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise bad(str(exc)) from None
    if parts.scheme not in SCHEMES:
        scheme = parts.scheme or "none"
        raise bad(f"the scheme is {scheme!r}, not one of {', '.join(SCHEMES)}")
    db_values = parse_qs(parts.query).get("db", [])
    if parts.scheme == "unix":
        if parts.hostname or port is not None:
            raise bad("a unix URL names a socket path, not a host (unix:///path/to/redis.sock)")
        if not parts.path or parts.path == "/":
            raise bad("the socket path is missing")
    else:
        if not parts.hostname:
            raise bad("the host is missing")
        db_path = parts.path.lstrip("/")
        if db_path:
            db_values.append(db_path)
    for db in db_values:
        if not re.fullmatch(r"\d+", db):
            raise bad(f"the database must be a number, not {db!r}")
        if int(db) > MAX_DB:
            raise bad(f"the database number {db} is above {MAX_DB}, the most Redis takes")
    # What redis-py reads from the query (?socket_timeout=..., ?ssl_cert_reqs=...), as
    # it will read it: a connection object is made, but nothing connects.
    try:
        redis.ConnectionPool.from_url(url).make_connection()
    except TypeError as exc:  # a keyword the connection class does not take
        named = re.search(r"keyword argument '(\w+)'", str(exc))
        name = named.group(1) if named else str(exc)
        raise bad(f"the query argument {name!r} is not one a {parts.scheme}:// URL takes") from None
    except (ValueError, RedisError) as exc:
        raise bad(f"a query argument is invalid ({str(exc).rstrip('.')})") from None
    return url


def describe(client: redis.Redis) -> str:
    """A password-free description of where ``client`` connects, for messages."""
    kwargs = client.get_connection_kwargs()
    db = kwargs.get("db", 0)
    if "path" in kwargs:
        return f"unix://{kwargs['path']}?db={db}"
    conn_cls = getattr(client.connection_pool, "connection_class", None)
    tls = isinstance(conn_cls, type) and issubclass(conn_cls, redis.SSLConnection)
    scheme = "rediss" if tls else "redis"
    return f"{scheme}://{kwargs.get('host', 'localhost')}:{kwargs.get('port', 6379)}/{db}"


# ------------------------------------------------------------------------- retries

# The deadline of the outermost retrying call on this thread. redis-py nests retries
# (a command's retry reconnects, and the reconnect retries too); sharing one deadline
# keeps the total within the budget instead of multiplying it.
_deadline = threading.local()


@contextlib.contextmanager
def retry_deadline(timeout_s: float) -> Iterator[None]:
    """Bound the retries of every Redis command on this thread to ``timeout_s`` in all.

    Applies to clients made by :func:`redis_from_url`; nested deadlines keep the
    earliest.
    """
    previous: float | None = getattr(_deadline, "at", None)
    at = time.monotonic() + max(0.0, timeout_s)
    _deadline.at = at if previous is None else min(previous, at)
    try:
        yield
    finally:
        _deadline.at = previous


class BudgetRetry(Retry):
    """A redis-py ``Retry`` bounded by total time (``budget_s``) rather than only a count.

    Retries connection errors and timeouts (a restarting server, ``LOADING``), never an
    authentication failure.
    """

    def __init__(self, budget_s: float) -> None:
        self.budget_s = max(0.0, budget_s)
        # The count is a backstop only: even at the shortest backoffs it outlasts the
        # budget, so the deadline is what stops the retries.
        retries = math.ceil(self.budget_s / (RETRY_CAP_S / 2)) + 8 if self.budget_s else 0
        super().__init__(
            EqualJitterBackoff(cap=RETRY_CAP_S, base=RETRY_BASE_S),
            retries,
            (ConnectionError, TimeoutError, socket.timeout),
        )

    def call_with_retry(
        self,
        do: Callable[[], T],
        fail: Callable[..., Any],
        is_retryable: Callable[[Exception], bool] | None = None,
        with_failure_count: bool = False,
    ) -> T:
        # Same contract as redis-py's Retry.call_with_retry, plus the shared deadline.
        outer: float | None = getattr(_deadline, "at", None)
        deadline = time.monotonic() + self.budget_s if outer is None else outer
        _deadline.at = deadline
        try:
            # EqualJitterBackoff keeps no state between calls: nothing to reset.
            failures = 0
            while True:
                try:
                    return do()
                except self._supported_errors as error:
                    if isinstance(error, NOT_RETRYABLE) or (
                        is_retryable is not None and not is_retryable(error)
                    ):
                        raise
                    failures += 1
                    if with_failure_count:
                        fail(error, failures)
                    else:
                        fail(error)
                    remaining_s = deadline - time.monotonic()
                    if remaining_s <= 0 or (self._retries >= 0 and failures > self._retries):
                        raise
                    time.sleep(min(self._backoff.compute(failures), remaining_s))
        finally:
            _deadline.at = outer


# ------------------------------------------------------------------------- clients


def redis_from_url(
    url: str,
    *,
    retry_s: float = 30.0,
    socket_timeout_s: float = SOCKET_TIMEOUT_S,
) -> redis.Redis:
    """A Redis client (bytes in and out) that rides out a Redis restart.

    A command that fails on a connection error or a timeout is retried with
    exponential backoff (capped at 1 s, with jitter) for up to ``retry_s`` in total,
    reconnecting as needed; pooled connections are health-checked before reuse. No
    connection is made until the first command (see :func:`wait_for_redis`).

    Retried commands run at least once: a write whose reply was lost may be applied
    twice (an XADD then adds a duplicate entry; results are idempotent by design).

    Raises:
        SettingsError: the URL is not a valid Redis URL.
    """
    url = check_redis_url(url)
    return redis.Redis.from_url(
        url,
        retry=BudgetRetry(retry_s),
        health_check_interval=HEALTH_CHECK_INTERVAL_S,
        socket_timeout=socket_timeout_s,
        socket_connect_timeout=min(SOCKET_CONNECT_TIMEOUT_S, socket_timeout_s),
        decode_responses=False,
    )


def wait_for_redis(client: redis.Redis, timeout_s: float) -> None:
    """PING until Redis answers, for at most ``timeout_s``.

    Raises:
        BrokerAuthError: Redis refused the credentials (not retried).
        BrokerUnavailable: no answer within ``timeout_s``.
    """
    where = describe(client)
    deadline = time.monotonic() + timeout_s
    last: Exception | None = None
    with retry_deadline(timeout_s):
        while True:
            try:
                client.ping()
                return
            except NOT_RETRYABLE as exc:
                raise BrokerAuthError(
                    f"Redis at {where} refused the credentials: {exc}. Check the user name "
                    "and password in the Redis URL (redis://[user]:PASSWORD@host:port/db) "
                    "against the server's requirepass or ACL"
                ) from exc
            except (ConnectionError, TimeoutError, OSError) as exc:
                last = exc
            except RedisError as exc:
                if "DB index is out of range" in str(exc):
                    db = client.get_connection_kwargs().get("db", 0)
                    raise BrokerUnavailable(
                        f"Redis at {where}: the database number {db} is out of the "
                        "server's range (its `databases` setting: 0 to 15 by default); "
                        "choose a database the server has in the Redis URL"
                    ) from exc
                raise BrokerUnavailable(f"Redis at {where} failed a PING: {exc}") from exc
            remaining_s = deadline - time.monotonic()
            if remaining_s <= 0:
                raise BrokerUnavailable(
                    f"Redis at {where} did not answer within {timeout_s:g} s ({last}). "
                    "Start it, or fix the host/port in the Redis URL; a server that is "
                    "loading a large dataset answers once it has loaded"
                ) from last
            time.sleep(min(0.1, remaining_s))
