"""A new attempt of a work item: the event that records it and the task that runs it.

Both are built from the same facts, so what the log says was dispatched is
exactly what a worker receives.
"""

from __future__ import annotations

from pact_workers.models.work import ROLE_FOR_PHASE, CachedOutput, Phase, TaskMessage
from scheduler.events import CachedResult, ItemDispatched
from scheduler.gates.dimensions import GateRecord
from scheduler.gates.events import Stage
from scheduler.settings import Settings
from scheduler.state import RunState


def new_attempt(
    state: RunState,
    settings: Settings,
    component_id: str,
    phase: Phase,
    *,
    inputs: dict[str, str],
    verify_inputs: dict[str, str],
    action_key: str = "",
    cached: CachedResult | None = None,
    gate: GateRecord | None = None,
    stage: Stage = "work",
) -> tuple[ItemDispatched, TaskMessage]:
    """The next attempt of ``(component_id, phase)``, with the earlier failures as feedback.

    ``cached``: a hit of the action cache (its key ``action_key``) that the worker
    serves instead of asking the agent. ``gate``: the item's variety score and gates;
    ``stage``: ``teachback`` when the agent must restate its task before the work.
    """
    item = state.item(component_id, phase)
    attempt = item.attempt + 1
    role = ROLE_FOR_PHASE[phase].value
    timeout_s = float(settings.timeouts.get_timeout(role))
    feedback = [f for f in item.failures if f.summary]
    event = ItemDispatched(
        component_id=component_id,
        phase=phase,
        attempt=attempt,
        role=role,
        inputs=inputs,
        verify_inputs=verify_inputs,
        feedback=feedback,
        timeout_s=timeout_s,
        action_key=action_key,
        cached=cached,
        gate=gate,
        stage=stage,
    )
    task = TaskMessage(
        run_id=state.run_id,
        component_id=component_id,
        phase=phase,
        attempt=attempt,
        inputs=inputs,
        verify_inputs=verify_inputs,
        feedback=feedback,
        environment=settings.environment,
        timeout_s=min(timeout_s, settings.verify_timeout_s),
        agent=state.agent or "replay",
        agent_options=state.agent_options,
        sandbox=state.sandbox or "local",
        cached=(
            CachedOutput(output=cached.output, verify=not cached.trusted)
            if cached is not None
            else None
        ),
        stage=stage,
        variety=_variety(gate),
    )
    return event, task


def _variety(gate: GateRecord | None) -> str:
    """The gate record in a few words, for the task's arguments (Flower)."""
    if gate is None:
        return ""
    d = gate.dimensions
    return (
        f"score={gate.score} novelty={d.novelty} scope={d.scope} "
        f"uncertainty={d.uncertainty} risk={d.risk} teachback={gate.gates.teachback_mode} "
        f"auditor={'required' if gate.gates.auditor_required else 'no'} gates={gate.mode.value}"
    )
