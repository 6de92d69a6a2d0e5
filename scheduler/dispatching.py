"""Dispatching ready items (mixed into :class:`scheduler.run.RunController`).

Rules: only an active run dispatches; ready items go critical path first, as far as
the budget allows (when none fits and nothing is in flight, the run stops with the
items suspended *far*); each new attempt's inputs are assembled from the store, the
gates and the action cache have their say, and the ``item_dispatched`` event is
logged before the task is sent (the send waits for the commit). An item whose inputs
cannot be assembled fails for good without an attempt, and what waits on it is
poisoned.
"""

from __future__ import annotations

from pact_workers.errors import PactError, VerificationError
from pact_workers.models.work import ErrorClass, Phase
from scheduler.attempts import new_attempt
from scheduler.estimates import prior_attempt_usd, within_budget
from scheduler.events import ItemFailed
from scheduler.inputs import build_inputs
from scheduler.runpart import RunPart
from scheduler.state import RunStatus
from scheduler.verdicts import budget_stop
from scheduler.wavefront import Key


class Dispatching(RunPart):
    """The part of the run controller that picks ready items and sends attempts."""

    def dispatch_ready(self) -> None:
        """Dispatch every ready item the budget allows (the single-run loop)."""
        for cid, phase in self.ready():
            self.dispatch(cid, phase)
        self.commit()

    def ready(self) -> list[Key]:
        """Ready items within the budget, critical path first; empty unless active.

        When items are ready but none fits the budget and nothing is in flight, the
        run stops here (the items are suspended *far*).
        """
        assert self.scheduler is not None
        if self.state.status is not RunStatus.ACTIVE:
            return []
        ready = self.scheduler.ready_for_state(self.state, now=self.clock())
        allowed, blocked = within_budget(self.state, ready, self.settings.budget, self._priors())
        if blocked and not allowed and not self.state.in_flight():
            for event in budget_stop(self.state, blocked[0][1]):
                self._log(event)
        return allowed

    def _priors(self) -> dict[Phase, float]:
        if self._prior_usd is None:
            self._prior_usd = prior_attempt_usd(self.state.agent, self.state.agent_options)
        return self._prior_usd

    def dispatch(self, component_id: str, phase: Phase) -> None:
        """Log and send one new attempt of a ready item."""
        item = self.state.item(component_id, phase)
        attempt = item.attempt + 1
        try:
            inputs, verify_inputs = build_inputs(
                self.state, self.store, component_id, phase, lessons=self.lessons
            )
        except (VerificationError, PactError) as exc:
            self._fail_without_attempt(component_id, phase, attempt, str(exc))
            return
        gate, stage = self._gate_dispatch(component_id, phase)
        inputs = self._gate_inputs(component_id, phase, stage, inputs)
        try:
            # Whatever the task names is where its worker reads it, for another while
            # (the fleet's Redis lets blobs expire; sent with the next commit).
            self.store.refresh([*inputs.values(), *verify_inputs.values()])
        except PactError as exc:
            self._fail_without_attempt(component_id, phase, attempt, str(exc))
            return
        action_key, cached = (
            self.cache.look_up(
                self.state,
                self.store,
                component_id,
                phase,
                inputs=inputs,
                verify_inputs=verify_inputs,
                environment=self.settings.environment,
            )
            if self.cache is not None and stage == "work"
            else ("", None)
        )
        event, task = new_attempt(
            self.state,
            self.settings,
            component_id,
            phase,
            inputs=inputs,
            verify_inputs=verify_inputs,
            action_key=action_key,
            cached=cached,
            gate=gate,
            stage=stage,
        )
        self._log(event)
        self.leases.grant((component_id, phase, attempt))
        self._after_commit(lambda: self.executor.submit(task))

    def _fail_without_attempt(
        self, component_id: str, phase: Phase, attempt: int, error: str
    ) -> None:
        self._log(
            ItemFailed(
                component_id=component_id,
                phase=phase,
                attempt=attempt,
                error_class=ErrorClass.PERMANENT,
                error_type="inputs",
                error=error,
                decision="give_up",
            )
        )
        self._poison(component_id, phase)
