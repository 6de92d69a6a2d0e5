"""Redis key builders, URL checks and redaction, and the retry policy (no server)."""

from __future__ import annotations

import time
from collections.abc import Iterator

import fakeredis
import pytest
from redis.exceptions import AuthenticationError, BusyLoadingError, ConnectionError

from pact_workers.artifacts import ArtifactStore
from pact_workers.errors import ArtifactError, SettingsError
from pact_workers.fleet import (
    Leases,
    RedisBlobStore,
    check_redis_url,
    keys,
    redact,
    redis_from_url,
    retry_deadline,
)
from pact_workers.fleet.connection import BudgetRetry, describe
from pact_workers.models.work import Phase, TaskMessage

DIGEST = "sha256:" + "ab" * 32


def test_key_builders_put_every_key_under_the_pact_prefix() -> None:
    assert keys.artifact(DIGEST) == f"pact:artifact:{DIGEST}"
    assert keys.RESULTS_STREAM == "pact:results"
    assert keys.run_results("a1b2") == "pact:results:a1b2"
    assert keys.RESULTS_GROUP == "scheduler"
    assert keys.lease("a1b2", "store", Phase.TEST, 3) == "pact:lease:a1b2:store:test:3"
    assert keys.current_attempt("a1b2", "store", "test") == "pact:attempt:a1b2:store:test"
    assert keys.done("a1b2", "store", Phase.IMPLEMENT, 1) == "pact:done:a1b2:store:implement:1"
    assert keys.worker("celery@host") == "pact:worker:celery@host"
    assert keys.RUNS == "pact:runs"
    assert keys.SUBMISSIONS == "pact:submissions"
    assert keys.SUBMISSIONS_GROUP == "service"
    assert keys.owner("a1b2") == "pact:owner:a1b2"
    assert keys.ACTIVE_RUNS == "pact:runs:active"
    assert keys.RUN_FENCES == "pact:runs:fence"
    assert keys.SCHEDULERS == "pact:schedulers"
    assert keys.RUNS_IN_FLIGHT == "pact:runs:in_flight"
    assert keys.plan_reply("c0ffee") == "pact:plan:c0ffee"


def test_a_phase_and_its_value_build_the_same_key() -> None:
    for phase in Phase:
        assert keys.lease("r", "c", phase, 1) == keys.lease("r", "c", phase.value, 1)
        assert keys.lease("r", "c", phase, 1).split(":") == ["pact", "lease", "r", "c", phase, "1"]


def test_every_key_is_documented_in_the_keys_module() -> None:
    doc = keys.__doc__ or ""
    for pattern in (
        "pact:artifact:",
        "pact:results ",
        "pact:results:<run>",
        "pact:attempt:<run>:<comp>:<phase>",
        "pact:lease:<run>:<comp>:<phase>:<n>",
        "pact:done:<run>:<comp>:<phase>:<n>",
        "pact:worker:<id>",
        "pact:runs",
        "pact:submissions",
        "pact:owner:<run>",
        "pact:runs:active",
        "pact:runs:fence",
        "pact:schedulers",
        "pact:runs:in_flight",
        "pact:cancel:<run>",
        "pact:plan:<id>",
        "pact.<role>",
        "unacked_index",
        "_kombu.binding.",
        "celery-task-meta-",
    ):
        assert pattern in doc, pattern


@pytest.mark.parametrize(
    "url",
    [
        "redis://localhost",
        "redis://localhost:6379/0",
        "redis://:p%40ss@redis.internal:6380/15",
        "redis://user:pw@10.0.0.5/2",
        "rediss://:pw@redis.example.com:6380/0?ssl_cert_reqs=required",
        "redis://[::1]:6379",
        "unix:///run/redis/redis.sock",
        "unix://:pw@/run/redis/redis.sock?db=3",
        "  redis://localhost:6379/0\n",
    ],
)
def test_valid_redis_urls_are_accepted(url: str) -> None:
    assert check_redis_url(url) == url.strip()


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("", "empty"),
        ("localhost:6379", "scheme"),
        ("http://:hunter2@localhost:6379", "scheme is 'http'"),
        ("amqp://guest:guest@rabbit//", "scheme is 'amqp'"),
        ("redis://", "host is missing"),
        ("redis://:hunter2@localhost:notaport/0", "Port"),
        ("redis://localhost:6379/zero", "database must be a number"),
        ("unix:///run/redis.sock?db=x", "database must be a number"),
        ("unix://", "socket path is missing"),
        ("unix://localhost:6379/redis.sock", "not a host"),
    ],
)
def test_invalid_redis_urls_are_rejected_with_the_redacted_url_and_the_valid_forms(
    url: str, problem: str
) -> None:
    with pytest.raises(SettingsError, match=problem) as err:
        check_redis_url(url)
    message = str(err.value)
    assert "hunter2" not in message
    assert "redis://[[user]:password@]host[:port][/db]" in message
    assert "unix://" in message


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("redis://:hunter2@localhost:6379/0", "redis://:***@localhost:6379/0"),
        ("redis://alice:hunter2@localhost/0", "redis://alice:***@localhost/0"),
        ("rediss://:hun/ter@2@host:6380", "rediss://:***@host:6380"),
        ("unix://:hunter2@/run/redis.sock?db=1", "unix://:***@/run/redis.sock?db=1"),
        ("redis://localhost:6379/0", "redis://localhost:6379/0"),
        ("redis://alice@localhost:6379/0", "redis://alice@localhost:6379/0"),
        (":hunter2@host", ":***@host"),
    ],
)
def test_redact_hides_the_password(url: str, shown: str) -> None:
    assert redact(url) == shown


def test_a_client_from_a_url_is_configured_to_ride_out_restarts() -> None:
    client = redis_from_url("rediss://:pw@cache.example:6380/3", retry_s=12)
    try:
        kwargs = client.get_connection_kwargs()
        assert kwargs["password"] == "pw" and kwargs["db"] == 3
        assert kwargs["health_check_interval"] > 0
        assert kwargs["socket_timeout"] > kwargs["socket_connect_timeout"] > 0
        assert isinstance(kwargs["retry"], BudgetRetry) and kwargs["retry"].budget_s == 12
        assert describe(client) == "rediss://cache.example:6380/3"  # no password
    finally:
        client.close()
    with pytest.raises(SettingsError, match="scheme"):
        redis_from_url("memcached://localhost")


def _refused() -> None:
    raise ConnectionError("Connection refused")


def _wrong_password() -> None:
    raise AuthenticationError("WRONGPASS invalid username-password pair")


def _ignore(error: Exception) -> None:
    pass


def test_retries_stop_at_the_time_budget_and_never_retry_a_bad_password() -> None:
    failures: list[Exception] = []

    start = time.monotonic()
    with pytest.raises(ConnectionError):
        BudgetRetry(0.5).call_with_retry(_refused, failures.append)
    assert 0.4 < time.monotonic() - start < 1.5
    assert len(failures) > 2

    failures.clear()
    with pytest.raises(AuthenticationError):
        BudgetRetry(10).call_with_retry(_wrong_password, failures.append)
    assert failures == []


def test_a_loading_server_is_retried_until_it_answers() -> None:
    replies: Iterator[Exception | str] = iter(
        [BusyLoadingError("LOADING"), BusyLoadingError("LOADING"), "PONG"]
    )

    def ping() -> str:
        reply = next(replies)
        if isinstance(reply, Exception):
            raise reply
        return reply

    assert BudgetRetry(5).call_with_retry(ping, lambda error, count: None, with_failure_count=True)


def test_nested_retries_share_the_outermost_deadline() -> None:
    inner = BudgetRetry(30)

    def reconnect() -> None:  # as redis-py's connect() retries inside a command's retry
        inner.call_with_retry(_refused, _ignore)

    start = time.monotonic()
    with pytest.raises(ConnectionError):
        BudgetRetry(0.5).call_with_retry(reconnect, _ignore)
    assert time.monotonic() - start < 1.5

    start = time.monotonic()
    with pytest.raises(ConnectionError), retry_deadline(0.3):
        BudgetRetry(30).call_with_retry(_refused, _ignore)
    assert time.monotonic() - start < 1.0


def test_blobs_and_fencing_work_on_an_in_memory_redis(fake: fakeredis.FakeRedis) -> None:
    store = ArtifactStore(RedisBlobStore(fake))
    digest = store.put_bundle({"a.py": b"x = 1\n"})
    assert store.get_bundle(digest) == {"a.py": b"x = 1\n"}
    with pytest.raises(ArtifactError, match="missing"):
        store.blobs.get_blob(DIGEST)

    leases = Leases(fake)
    t1 = TaskMessage(run_id="r", component_id="c", phase=Phase.TEST, attempt=1)
    t2 = t1.model_copy(update={"attempt": 2})
    leases.dispatch(t2)
    assert leases.is_current(t2) and not leases.is_current(t1)
