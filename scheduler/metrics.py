"""Prometheus metrics of the scheduler service.

Gauges are set from the runs' states each loop; counters are fed by the audit
events the runs log, so what the metrics say is what the logs say.
"""

from __future__ import annotations

from collections.abc import Iterable

from prometheus_client import CollectorRegistry, Counter, Gauge, start_http_server

from pact_workers.models.work import IN_FLIGHT, ROLE_FOR_PHASE, ItemStatus, Role
from scheduler.events import (
    Event,
    ItemFailed,
    ItemSucceeded,
    ResultDropped,
    RunPaused,
)
from scheduler.policy import STALLED, WORKER_LOST
from scheduler.state import RunState


class SchedulerMetrics:
    """The metrics of one scheduler service (its own registry, so tests can make many)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.runs = Gauge("pact_runs", "Runs by state", ["state"], registry=r)
        self.ready = Gauge("pact_ready_items", "Items ready to dispatch", ["role"], registry=r)
        self.in_flight = Gauge(
            "pact_in_flight_items", "Items dispatched and not finished", ["role"], registry=r
        )
        self.completions = Counter(
            "pact_item_completions", "Items verified and done", ["role"], registry=r
        )
        self.failures = Counter(
            "pact_item_failures", "Failed attempts by error class", ["error_class"], registry=r
        )
        self.pauses = Counter("pact_run_pauses", "Runs paused (systemic failures)", registry=r)
        self.lease_expiries = Counter(
            "pact_lease_expiries",
            "Attempts whose lease expired (lost or stalled worker)",
            registry=r,
        )
        self.dropped = Counter(
            "pact_results_dropped", "Late or duplicate results dropped", registry=r
        )
        #: Items in flight by where their workers report them (scheduler.lifecycle).
        self.by_status = Gauge(
            "pact_in_flight_items_by_status",
            "Items in flight: dispatched, running (the agent works) or verifying",
            ["status"],
            registry=r,
        )
        #: Items in the ``ready`` state (prerequisites done, not in flight) of the runs
        #: this service holds, whether or not a slot is free for them.
        self.ready_state = Gauge(
            "pact_items_in_ready_state",
            "Items whose prerequisites are done and that wait to be dispatched",
            registry=r,
        )
        self.packed = Counter(
            "pact_packed_attempts",
            "Attempts sent several to a message (short attempts beyond the fleet's slots)",
            registry=r,
        )
        self._packed_seen = 0
        for role in Role:
            self.ready.labels(role.value).set(0)
            self.in_flight.labels(role.value).set(0)
        for status in IN_FLIGHT:
            self.by_status.labels(status.value).set(0)

    def serve(self, port: int, addr: str = "127.0.0.1") -> None:
        start_http_server(port, addr=addr, registry=self.registry)

    def observe(self, event: Event, state: RunState) -> None:
        """A run listener: count what the audit log records."""
        if isinstance(event, ItemSucceeded):
            self.completions.labels(ROLE_FOR_PHASE[event.phase].value).inc()
        elif isinstance(event, ItemFailed):
            self.failures.labels(event.error_class.value).inc()
            if event.error_type in {WORKER_LOST, STALLED}:
                self.lease_expiries.inc()
        elif isinstance(event, RunPaused):
            self.pauses.inc()
        elif isinstance(event, ResultDropped):
            self.dropped.inc()

    def update(self, runs: Iterable[tuple[str, RunState, int]]) -> None:
        """Set the gauges from (registry state, run state, ready items of that run's roles)."""
        by_state: dict[str, int] = {}
        flying: dict[str, int] = {role.value: 0 for role in Role}
        stages: dict[str, int] = {status.value: 0 for status in IN_FLIGHT}
        ready = 0
        for registry_state, state, _ in runs:
            by_state[registry_state] = by_state.get(registry_state, 0) + 1
            ready += state.index.counts[ItemStatus.READY]  # kept by the fold, O(1)
            for item in state.in_flight():
                flying[ROLE_FOR_PHASE[item.phase].value] += 1
                stages[item.status.value] += 1
        for status, count in stages.items():
            self.by_status.labels(status).set(count)
        self.ready_state.set(ready)
        for name in ("queued", "active", "paused", "completed", "failed"):
            self.runs.labels(name).set(by_state.get(name, 0))
        for role, count in flying.items():
            self.in_flight.labels(role).set(count)

    def count_packed(self, total: int) -> None:
        """The fleet connection has sent ``total`` attempts in packs so far."""
        if total > self._packed_seen:
            self.packed.inc(total - self._packed_seen)
            self._packed_seen = total

    def set_ready(self, ready_by_role: dict[str, int]) -> None:
        for role in Role:
            self.ready.labels(role.value).set(ready_by_role.get(role.value, 0))
