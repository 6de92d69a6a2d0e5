"""How each role is served: ``pact.yaml``'s ``agents:`` section, validated.

``agents.default`` applies to every role, ``agents.<role>`` overrides it field by field;
:meth:`AgentsSettings.for_role` merges the two. The configuration never holds a secret:
``api_key_env`` names the environment variable that holds the key on the worker. The
backends (``anthropic``, ``openai``, ``command``) build themselves from an
:class:`AgentConfig`, and :mod:`pact_workers.agents.factory` builds the backends, so this
module imports neither.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from pact_workers.models.work import Role

__all__ = ["DEFAULT_MODELS", "AgentConfig", "AgentsSettings", "Backend"]

Backend = Literal["anthropic", "openai", "command", "replay", "noop"]

#: The model a backend uses when the configuration names none.
DEFAULT_MODELS = {"anthropic": "claude-sonnet-4-6", "openai": "gpt-4.1"}

#: What a shell (and ``export``) takes as an environment variable's name.
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_NAMES = "(letters, digits and '_', not starting with a digit), such as ANTHROPIC_API_KEY"


class AgentConfig(BaseModel):
    """How one role is served (``pact.yaml``: ``agents.default`` and ``agents.<role>``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    backend: Backend | None = None
    model: str = ""
    base_url: str | None = None
    #: Name of the environment variable holding the API key (default: the SDK's own).
    api_key_env: str | None = None
    max_tokens: int = Field(default=16_000, ge=256)
    idle_timeout_s: float = Field(default=120.0, gt=0)
    max_retries: int = Field(default=4, ge=0)
    #: command backend: the argv template ({prompt_file}, {workspace} are filled in).
    argv: list[str] = Field(default_factory=list)
    network: bool = True
    timeout_s: float = Field(default=1800.0, gt=0)
    #: command backend: a directory on each worker copied into every agent workspace.
    files_dir: str | None = None
    #: command backend: worker environment variables the command gets (besides the key).
    env_passthrough: list[str] = Field(default_factory=list)

    @field_validator("api_key_env")
    @classmethod
    def _check_key_env(cls, value: str | None) -> str | None:
        # Checked here, where pact.yaml is read: a name such as ``a=b`` can never be
        # set, and was otherwise reported only as a key that is not set.
        if value is not None and not ENV_NAME.fullmatch(value):
            raise ValueError(f"not the name of an environment variable {_NAMES}")
        return value

    @field_validator("env_passthrough")
    @classmethod
    def _check_passthrough(cls, value: list[str]) -> list[str]:
        # A name such as ``PATH=/bin`` is never in a worker's environment: the command
        # would silently go without it.
        bad = [name for name in value if not ENV_NAME.fullmatch(name)]
        if bad:
            shown = ", ".join(repr(name) for name in bad[:5])
            raise ValueError(f"{shown}: not the name of an environment variable {_NAMES}")
        return value


class AgentsSettings(BaseModel):
    """``pact.yaml``'s ``agents:``: a default and optional per-role configurations."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    default: AgentConfig = Field(default_factory=AgentConfig)
    contract_author: AgentConfig | None = None
    test_author: AgentConfig | None = None
    code_author: AgentConfig | None = None
    integrator: AgentConfig | None = None
    trace_analyst: AgentConfig | None = None
    #: Reviews a verified attempt of an item scoring 7 or more (``gates: blocking``).
    auditor: AgentConfig | None = None
    #: The planning roles of ``pact plan``.
    interviewer: AgentConfig | None = None
    decomposer: AgentConfig | None = None

    def for_role(self, role: Role, backend: str) -> AgentConfig:
        """The role's configuration over the default; ``backend`` fills in what neither set."""
        merged = self.default.model_dump(exclude_unset=True)
        specific = getattr(self, role.value)
        if specific is not None:
            merged.update(specific.model_dump(exclude_unset=True))
        merged.setdefault("backend", backend)
        if not merged.get("model") and merged["backend"] in DEFAULT_MODELS:
            merged["model"] = DEFAULT_MODELS[merged["backend"]]
        return AgentConfig.model_validate(merged)
