"""The planners (their implementations live with the agents, in
:mod:`pact_workers.agents.planning`, so that a worker can answer planning calls)."""

from __future__ import annotations

from pact_workers.agents.planning import (
    LLMPlanner,
    PlanAnswer,
    PlanCall,
    Planner,
    ReplayPlanner,
    answer_call,
    planner_from_options,
)

__all__ = [
    "LLMPlanner",
    "PlanAnswer",
    "PlanCall",
    "Planner",
    "ReplayPlanner",
    "answer_call",
    "planner_from_options",
]
