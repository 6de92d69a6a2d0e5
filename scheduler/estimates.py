"""What one more attempt of a phase may cost, before it is dispatched.

The budget is checked before every dispatch, but spend is only known when a
result comes back: without an estimate, a run with four workers and a budget
smaller than one call would dispatch four calls and overspend many times over.
So every attempt in flight holds an estimate of its cost against the budget:

- once attempts of a phase have finished, the mean cost of those attempts;
- before that, a prior from the run's agent: for a provider backend, a full
  answer (``max_tokens`` at the role's model's output price, the most one call
  can produce); for the replay agent, the usage its script reports; else 0.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path

from pydantic import ValidationError

from pact_workers.agents.pricing import Price, price_for
from pact_workers.errors import InputError
from pact_workers.models.work import ROLE_FOR_PHASE, Phase
from scheduler.budget import BudgetSettings, check_dispatch
from scheduler.state import RunState

__all__ = [
    "attempt_estimates",
    "in_flight_estimate",
    "prior_attempt_usd",
    "within_budget",
]


def prior_attempt_usd(agent: str, options: Mapping[str, str]) -> dict[Phase, float]:
    """The cost of one attempt per phase before any has been observed (0: unknown)."""
    if agent == "replay" and options.get("replay_dir"):
        from pact_workers.agents.replay import load_replay_script

        try:
            script = load_replay_script(Path(options["replay_dir"]))
        except InputError:
            return {}
        return {
            phase: script.usage[role.value].cost_usd
            for phase, role in ROLE_FOR_PHASE.items()
            if role.value in script.usage
        }
    try:
        roles = json.loads(options.get("roles", "{}"))
        prices = {
            m: Price.model_validate(p) for m, p in json.loads(options.get("prices", "{}")).items()
        }
    except (ValueError, ValidationError):
        return {}
    out: dict[Phase, float] = {}
    for phase, role in ROLE_FOR_PHASE.items():
        config = roles.get(role.value) or {}
        price = price_for(str(config.get("model", "")), prices)
        if price is not None and config.get("backend") in {"anthropic", "openai"}:
            out[phase] = int(config.get("max_tokens", 0)) * price.output_per_mtok / 1_000_000
    return out


def attempt_estimates(state: RunState, priors: Mapping[Phase, float]) -> dict[Phase, float]:
    """Per phase: the mean cost of its finished attempts, else the prior."""
    attempts = state.index.finished_attempts
    out = dict(priors)
    for phase, count in attempts.items():
        spent = state.spend_by_phase.get(phase.value, 0.0)
        if spent > 0 and count > 0:
            out[phase] = spent / count
    return out


def in_flight_estimate(state: RunState, estimates: Mapping[Phase, float]) -> dict[str, float]:
    """The estimated cost of the attempts in flight, per phase (what is committed)."""
    committed: dict[str, float] = {}
    for item in state.in_flight():
        committed[item.phase.value] = committed.get(item.phase.value, 0.0) + estimates.get(
            item.phase, 0.0
        )
    return committed


def within_budget(
    state: RunState,
    ready: Sequence[tuple[str, Phase]],
    budget: BudgetSettings,
    priors: Mapping[Phase, float],
) -> tuple[list[tuple[str, Phase]], list[tuple[tuple[str, Phase], str]]]:
    """Split ``ready`` items (in priority order) into those the budget allows, each
    committing its estimate, and those it blocks, each with the reason."""
    estimates = attempt_estimates(state, priors)
    committed = in_flight_estimate(state, estimates)
    allowed: list[tuple[str, Phase]] = []
    blocked: list[tuple[tuple[str, Phase], str]] = []
    for key in ready:
        phase = key[1]
        estimate = estimates.get(phase, 0.0)
        reason = check_dispatch(
            phase.value,
            spend_total=state.usage.cost_usd,
            phase_spend=state.spend_by_phase,
            budget=budget,
            committed_usd=committed,
            estimate_usd=estimate,
        )
        if reason is None:
            allowed.append(key)
            committed[phase.value] = committed.get(phase.value, 0.0) + estimate
        else:
            blocked.append((key, reason))
    return allowed, blocked
