"""Building the agent a run asked for, on whichever machine runs the attempt.

A run names an agent (``replay``, ``noop``, ``anthropic``, ``openai``, ``command``) and
options that never hold secrets: the replay directory, or the per-role backend
configuration from ``pact.yaml`` as JSON. API keys come from the environment of the
process that calls the provider (the worker), never from the run.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING

from pydantic import ValidationError

from pact_workers.agents.base import Agent, AgentOutput, AgentRequest
from pact_workers.agents.config import DEFAULT_MODELS, AgentConfig, AgentsSettings, Backend
from pact_workers.agents.pricing import Price
from pact_workers.agents.roles import DIAGNOSIS_FILE, TraceDiagnosis
from pact_workers.errors import InputError, PermanentAgentError
from pact_workers.models.work import Role, Usage

if TYPE_CHECKING:
    from pact_workers.sandbox.base import Sandbox

__all__ = [
    "AGENTS",
    "DEFAULT_MODELS",
    "AgentConfig",
    "AgentsSettings",
    "Backend",
    "RoutedAgent",
    "agent_options",
    "build_agent",
]

log = logging.getLogger(__name__)

#: The agents a run may name (``--agent``).
AGENTS = ("replay", "noop", "anthropic", "openai", "command")


def agent_options(
    name: str,
    agents: AgentsSettings,
    *,
    replay_dir: str | None = None,
    prices: Mapping[str, Price] | None = None,
) -> dict[str, str]:
    """The options a run records for ``name`` (and sends to every worker).

    ``prices`` (``pact.yaml``'s ``prices:``) travel with the run, so that every worker
    prices its calls the same way.
    """
    if name == "replay":
        return {"replay_dir": replay_dir} if replay_dir else {}
    if name == "noop":
        return {}
    # The trace analyst is optional: only a run whose pact.yaml configures it has one.
    roles = {
        role.value: agents.for_role(role, name).model_dump(mode="json")
        for role in Role
        if role is not Role.TRACE_ANALYST or agents.trace_analyst is not None
    }
    options = {"roles": json.dumps(roles, sort_keys=True)}
    if prices:
        table = {model: price.model_dump(mode="json") for model, price in prices.items()}
        options["prices"] = json.dumps(table, sort_keys=True)
    return options


def build_agent(name: str, options: dict[str, str], *, sandbox: Sandbox | None = None) -> Agent:
    """The agent for a run's ``agent`` and ``agent_options``.

    ``sandbox`` is where a ``command`` backend runs its agent: the run's own sandbox
    (without one, the command agent builds the one ``PACT_SANDBOX`` names).

    Raises:
        InputError: an unknown agent or malformed options.
    """
    if name == "replay":
        from pact_workers.agents.replay import ReplayAgent

        if "replay_dir" not in options:
            raise InputError("the replay agent needs a replay directory (--replay-dir)")
        return ReplayAgent(options["replay_dir"])
    if name == "noop":
        from pact_workers.agents.noop import NoopAgent

        return NoopAgent()
    if name not in AGENTS:
        raise InputError(f"unknown agent {name!r}; choose one of: {', '.join(AGENTS)}")
    try:
        raw = json.loads(options.get("roles", "{}"))
        configs = {Role(role): AgentConfig.model_validate(cfg) for role, cfg in raw.items()}
        prices = {
            model: Price.model_validate(price)
            for model, price in json.loads(options.get("prices", "{}")).items()
        }
    except (ValueError, AttributeError, ValidationError) as exc:
        raise InputError(f"agent options for {name!r} are malformed: {exc}") from exc
    analyst = configs.get(Role.TRACE_ANALYST)
    if analyst is not None and analyst.backend not in ("anthropic", "openai"):
        raise InputError(
            f"agents.trace_analyst: backend {analyst.backend!r} cannot diagnose failures; "
            "use anthropic or openai (or remove agents.trace_analyst from pact.yaml)"
        )
    agents = {role: _backend_agent(cfg, prices, sandbox) for role, cfg in configs.items()}
    return RoutedAgent(agents, name=name)


class RoutedAgent:
    """One agent per role, each built from that role's configuration.

    With a trace analyst configured, a retry of an implementation (a request with
    feedback) first asks the analyst why the last attempt failed, and the author's
    prompt carries that diagnosis; both calls' usage counts for the attempt. A
    diagnosis that cannot be had (a malformed or refused answer) is logged and the
    author goes on without it; a transient or systemic error fails the attempt as usual.
    """

    def __init__(self, agents: dict[Role, Agent], *, name: str) -> None:
        self.agents = agents
        self.name = name

    def produce(self, request: AgentRequest) -> AgentOutput:
        agent = self.agents.get(request.role)
        if agent is None:
            raise InputError(f"no agent is configured for role {request.role.value!r}")
        analyst = self.agents.get(Role.TRACE_ANALYST)
        if analyst is None or request.role not in _DIAGNOSED or not request.feedback:
            return agent.produce(request)
        spent = Usage()
        try:
            answer = analyst.produce(replace(request, role=Role.TRACE_ANALYST))
        except PermanentAgentError as exc:
            log.warning("%s: no diagnosis of the failure: %s", request.component_id, exc)
        else:
            spent = answer.usage
            diagnosis = TraceDiagnosis.model_validate_json(answer.files[DIAGNOSIS_FILE])
            request = replace(request, diagnosis=diagnosis.as_text())
        output = agent.produce(request)
        return replace(output, usage=spent + output.usage)


_DIAGNOSED = frozenset({Role.CODE_AUTHOR, Role.INTEGRATOR})


def _backend_agent(
    config: AgentConfig, prices: Mapping[str, Price], sandbox: Sandbox | None
) -> Agent:
    from pact_workers.agents.llm import StructuredAgent

    if config.backend == "anthropic":
        from pact_workers.agents.anthropic import AnthropicBackend

        return StructuredAgent(AnthropicBackend.from_config(config, prices=prices))
    if config.backend == "openai":
        from pact_workers.agents.openai import OpenAIBackend

        return StructuredAgent(OpenAIBackend.from_config(config, prices=prices))
    if config.backend == "command":
        from pact_workers.agents.command import CommandAgent

        return CommandAgent.from_config(config, sandbox=sandbox)
    if config.backend == "noop":
        from pact_workers.agents.noop import NoopAgent

        return NoopAgent()
    raise InputError(f"backend {config.backend!r} cannot serve a role from pact.yaml")
