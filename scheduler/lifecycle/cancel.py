"""Cancelling a run or some of its items (seed 004's CANCEL, by a human).

Rules:

- A cancel names who asks. A whole run's cancel cancels every item that is not
  finished (pending, suspended, in flight or awaiting review) and pauses the run as
  cancelled; naming items (``component`` or ``component/phase``) cancels only those.
- The current attempt of a cancelled item is fenced: its result, when it comes, is
  dropped; queued fleet tasks are revoked.
- When no process drives the run, ``pact cancel`` logs the event itself (under the
  run's lock). Otherwise it leaves a request in ``.pact/cancel-request.json`` (or, for
  a fleet run, in Redis, :func:`pact_workers.fleet.keys.cancel_request`) and the
  driving scheduler logs it at its next turn.
- ``pact resume`` carries a cancelled run on: cancelled items start again.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Collection, Sequence
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from pact_workers.errors import InputError, RunDirError
from pact_workers.files import atomic_write
from pact_workers.models.work import IN_FLIGHT, ItemStatus, Phase
from scheduler.lifecycle.events import RunCancelled
from scheduler.project import ProjectDir
from scheduler.state import PHASE_VALUES, RunState, item_key

log = logging.getLogger(__name__)

#: Statuses a cancel moves to ``cancelled`` (finished items stay as they are). An
#: attempt awaiting review is not finished: cancelled, its held result is dropped.
CANCELLABLE = frozenset(
    {
        ItemStatus.PENDING,
        ItemStatus.READY,
        ItemStatus.SUSPENDED,
        ItemStatus.AWAITING_REVIEW,
        *IN_FLIGHT,
    }
)
REQUEST_FILE = "cancel-request.json"


class CancelRequest(BaseModel):
    """What ``pact cancel`` asks of the process driving the run."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    by: str = Field(min_length=1, max_length=200)
    reason: str = Field(default="", max_length=2000)
    #: ``component`` or ``component/phase``; empty: the whole run.
    items: list[str] = Field(default_factory=list)


def split_item(name: str, components: Collection[str] = ()) -> tuple[str, str]:
    """``COMPONENT[/PHASE]`` as (component, phase; "" for every phase). Only the last
    ``/`` can end the component, and only when a phase name (or nothing) follows it or
    one of ``components`` precedes it: anything else is one component name, reported
    whole (ids are identifiers, so a name with ``/`` or ``[`` in it is none of a run's)."""
    head, slash, tail = name.rpartition("/")
    if slash and (not tail or tail in PHASE_VALUES or head in components):
        return head, tail
    return name, ""


def cancel_event(state: RunState, request: CancelRequest) -> RunCancelled:
    """The event for ``request``: the items it cancels, as the state stands now.

    Raises:
        InputError: an item names no component or phase of this run.
    """
    assert state.tree is not None
    keys: list[tuple[str, Phase]] = []
    if request.items:
        for name in request.items:
            cid, phase = split_item(name, state.tree.nodes)
            if cid not in state.tree.nodes:
                raise InputError(f"cancel {name!r}: no component {cid!r} in this run")
            matching = [
                (i.component_id, i.phase)
                for i in state.items.values()
                if i.component_id == cid and (not phase or i.phase.value == phase)
            ]
            if not matching:
                raise InputError(
                    f"cancel {name!r}: {cid!r} has no phase {phase!r} "
                    "(contract, test, implement or integrate)"
                )
            keys += matching
    else:
        keys = [(i.component_id, i.phase) for i in state.items.values()]
    chosen = [k for k in dict.fromkeys(keys) if state.items[item_key(*k)].status in CANCELLABLE]
    return RunCancelled(
        by=request.by, reason=request.reason, whole_run=not request.items, items=chosen
    )


def fenced_attempts(state: RunState, event: RunCancelled) -> list[tuple[str, Phase, int]]:
    """The attempts in flight that ``event`` fences (before it is applied)."""
    return [
        (cid, phase, state.item(cid, phase).attempt)
        for cid, phase in event.items
        if state.item(cid, phase).status in IN_FLIGHT
    ]


def request_cancel(project: ProjectDir, request: CancelRequest) -> None:
    """Leave ``request`` for the process driving the run (atomically)."""
    atomic_write(project.pact / REQUEST_FILE, request.model_dump_json().encode())


def take_cancel_request(project: ProjectDir) -> CancelRequest | None:
    """The request left for this run, removed as it is read (None: none, or unreadable:
    an unreadable one is logged and removed, never half-applied)."""
    path = project.pact / REQUEST_FILE
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    path.unlink(missing_ok=True)
    return parse_request(raw, where=str(path))


def parse_request(raw: bytes, *, where: str = "cancel request") -> CancelRequest | None:
    """A request as stored (file or Redis); None, logged, when it is not one."""
    try:
        return CancelRequest.model_validate_json(raw)
    except ValidationError as exc:
        log.warning("%s: ignored, not a cancel request: %s", where, exc)
        return None


def cancel_run(
    *,
    project_dir: Path,
    by: str,
    reason: str = "",
    items: Sequence[str] = (),
    wait_s: float = 30.0,
    clock: Callable[[], float] = time.monotonic,
) -> tuple[str, RunCancelled]:
    """``pact cancel DIR [ITEM...]``: ("cancelled", event) when the event is in the log,
    ("requested", event) when the driving process has not logged it within ``wait_s``.

    Raises:
        InputError: no run there, a finished run, an unknown item, a bad name.
    """
    from scheduler.audit import AuditLog, is_driven, read_events
    from scheduler.fold import apply
    from scheduler.launch import load_state
    from scheduler.state import RunStatus

    project = ProjectDir(project_dir)
    project.require_run()
    state, _ = load_state(project)
    if state.status is RunStatus.COMPLETED:
        raise InputError(f"{project_dir}: the run is completed; there is nothing to cancel")
    try:
        request = CancelRequest(by=by, reason=reason, items=list(items))
    except ValidationError as exc:
        first = exc.errors()[0]
        raise InputError(f"pact cancel: --{first['loc'][0]}: {first['msg']}") from None
    event = cancel_event(state, request)  # checks the names before anything is written
    if not is_driven(project.audit_path):
        try:
            with AuditLog(project.audit_path) as audit:
                logged = audit.append(event)
                project.write_state(apply(state, logged))
            return "cancelled", event
        except RunDirError:
            pass  # a process took the run meanwhile: leave it a request
    start = project.audit_path.stat().st_size
    request_cancel(project, request)
    deadline = clock() + wait_s
    while clock() < deadline:
        logged_events, _ = read_events(project.audit_path, offset=start)
        for logged_event in logged_events:
            if isinstance(logged_event, RunCancelled) and logged_event.by == by:
                return "cancelled", logged_event
        time.sleep(0.1)
    return "requested", event


def cancel_fleet_run(
    *,
    broker_url: str,
    run_id: str,
    by: str,
    reason: str = "",
    items: Sequence[str] = (),
    wait_s: float = 30.0,
    clock: Callable[[], float] = time.monotonic,
) -> str:
    """``pact cancel --broker URL RUN_ID``: leave the request in Redis for the scheduler
    driving the run; "cancelled" once it took it within ``wait_s``, else "requested".

    Raises:
        InputError: a bad name or URL, or no such run on this fleet.
        BrokerUnavailable: Redis cannot be reached.
    """
    import redis

    from pact_workers.errors import BrokerUnavailable
    from pact_workers.fleet import keys
    from pact_workers.fleet.connection import check_redis_url, redact, redis_from_url

    try:
        request = CancelRequest(by=by, reason=reason, items=list(items))
    except ValidationError as exc:
        first = exc.errors()[0]
        raise InputError(f"pact cancel: --{first['loc'][0]}: {first['msg']}") from None
    for name in request.items:
        cid, _ = split_item(name)
        if not cid or "/" in cid:
            raise InputError(
                f"cancel {name!r}: name an item as COMPONENT or COMPONENT/PHASE "
                "(contract, test, implement or integrate)"
            )
    client = redis_from_url(check_redis_url(broker_url))
    try:
        known = client.hexists(keys.RUNS, run_id) or client.exists(keys.run_results(run_id))
        if not known:
            raise InputError(f"no run {run_id!r} on the fleet at {redact(broker_url)}")
        key = keys.cancel_request(run_id)
        client.set(key, request.model_dump_json(), ex=keys.CANCEL_TTL_S)
        deadline = clock() + wait_s
        while clock() < deadline:
            if not client.exists(key):
                return "cancelled"
            time.sleep(0.1)
        return "requested"
    except redis.RedisError as exc:
        raise BrokerUnavailable(f"{redact(broker_url)}: {exc}") from exc
    finally:
        client.close()


def void_fleet_request(broker_url: str, run_id: str) -> bool:
    """``pact resume`` of a fleet run: remove a cancel request no scheduler took (it
    stopped first), so the resumed run is not cancelled at its first turn. True when
    there was one.

    Raises:
        BrokerUnavailable: Redis cannot be reached.
    """
    import redis

    from pact_workers.errors import BrokerUnavailable
    from pact_workers.fleet import keys
    from pact_workers.fleet.connection import check_redis_url, redact, redis_from_url

    client = redis_from_url(check_redis_url(broker_url))
    try:
        return bool(client.delete(keys.cancel_request(run_id)))
    except redis.RedisError as exc:
        raise BrokerUnavailable(f"{redact(broker_url)}: {exc}") from exc
    finally:
        client.close()
