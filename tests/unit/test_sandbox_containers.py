"""How a Docker sandbox tells an out-of-memory kill: the engine's OOM flag, or, when a
command died of SIGKILL and the flag is false, the engine's ``oom`` event for the
container (under load the engine may take the kernel's OOM event after the exit, and
then logs the event without setting the flag). A stand-in for docker-py's container
object; the real engine's side is tests/integration/test_docker_containment.py."""

from __future__ import annotations

from typing import Any

from pact_workers.sandbox.containers import oom_killed

SIGKILLED = 128 + 9


class Events(list[dict[str, Any]]):
    """docker-py's event stream: iterable, and closed after use."""

    closed = False

    def close(self) -> None:
        self.closed = True


class Api:
    def __init__(self, events: list[dict[str, Any]]) -> None:
        self.events_seen = events
        self.asked: list[dict[str, Any]] = []
        self.streams: list[Events] = []

    def events(self, **query: Any) -> Events:
        self.asked.append(query)
        wanted = query["filters"]
        stream = Events(
            e
            for e in self.events_seen
            if e["id"] == wanted["container"]
            and e["status"] == wanted["event"]
            and query["since"] <= e["time"] <= query["until"]
        )
        self.streams.append(stream)
        return stream


class Container:
    """docker-py's ``Container`` as ``oom_killed`` uses it."""

    def __init__(self, *, flagged: bool, events: tuple[dict[str, Any], ...] = ()) -> None:
        self.id = "c0ffee"
        self.attrs: dict[str, Any] = {"State": {"OOMKilled": flagged}}
        self.client = type("Client", (), {"api": Api(list(events))})()


STARTED = 1_700_000_000.0
OOM_EVENT = {"id": "c0ffee", "status": "oom", "time": int(STARTED) + 1}


def test_the_engines_oom_flag_is_enough() -> None:
    container = Container(flagged=True)
    assert oom_killed(container, SIGKILLED, timed_out=False, started=STARTED)
    assert container.client.api.asked == []


def test_a_sigkill_with_the_flag_false_is_an_oom_when_the_engine_logged_an_oom_event() -> None:
    container = Container(flagged=False, events=(OOM_EVENT, {**OOM_EVENT, "id": "other"}))
    assert oom_killed(container, SIGKILLED, timed_out=False, started=STARTED, wait_s=0.0)
    [query] = container.client.api.asked
    assert query["filters"] == {"container": "c0ffee", "event": "oom"}
    assert query["since"] <= STARTED and query["decode"] is True
    assert container.client.api.streams[0].closed


def test_a_sigkill_without_an_oom_event_is_no_oom() -> None:
    other = {**OOM_EVENT, "id": "other"}
    die = {**OOM_EVENT, "status": "die"}
    container = Container(flagged=False, events=(other, die))
    assert not oom_killed(container, SIGKILLED, timed_out=False, started=STARTED, wait_s=0.0)
    assert container.client.api.streams[0].closed


def test_other_exits_and_the_sandboxs_own_kill_ask_the_engine_nothing() -> None:
    for code, timed_out in ((1, False), (0, False), (128 + 15, False), (SIGKILLED, True)):
        container = Container(flagged=False, events=(OOM_EVENT,))
        assert not oom_killed(container, code, timed_out=timed_out, started=STARTED)
        assert container.client.api.asked == [], (code, timed_out)
    # A timeout's kill is the sandbox's, even when the engine also saw an OOM.
    flagged = Container(flagged=True, events=(OOM_EVENT,))
    assert not oom_killed(flagged, SIGKILLED, timed_out=True, started=STARTED)
