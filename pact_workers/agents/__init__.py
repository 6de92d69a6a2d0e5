"""Agent backends behind one small Protocol; implementations are siblings."""

from pact_workers.agents.base import Agent, AgentOutput, AgentRequest
from pact_workers.agents.replay import ReplayAgent

__all__ = ["Agent", "AgentOutput", "AgentRequest", "ReplayAgent"]
