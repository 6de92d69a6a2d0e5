"""The agent and the sandbox a run uses, built from names and settings."""

from __future__ import annotations

import os
from pathlib import Path

from pact_workers.agents.base import Agent
from pact_workers.agents.config import AgentsSettings
from pact_workers.agents.endpoint import is_loopback
from pact_workers.agents.factory import AGENTS, agent_options, build_agent
from pact_workers.errors import InputError
from pact_workers.models.documents import not_a_directory
from pact_workers.models.work import Role
from pact_workers.sandbox.base import Sandbox
from pact_workers.sandbox.local import LocalSandbox
from scheduler.settings import Settings

SANDBOXES = ("local", "docker")

#: Agents whose output comes from a model or a program the project does not control.
REAL_AGENTS = frozenset({"anthropic", "openai", "command"})

#: What a run of the noop agent proves, said wherever its results are shown.
NOOP_NOTE = (
    "the noop agent writes placeholder code: every item is 'done' because the fleet "
    "carried it through, not because anything real was built or verified"
)

#: What the local sandbox does not do, said by `pact doctor` and when a real agent uses it.
LOCAL_SANDBOX_LIMITS = (
    "the local sandbox isolates nothing: agent-written code and tests run as this user, "
    "can read and write any file this user can (outside the workspace too) and reach the "
    "network; use --sandbox docker for agents you do not trust"
)


def default_agent(settings: Settings) -> str | None:
    """The agent ``pact.yaml``'s ``agents:`` names when ``--agent`` is not given: the
    default backend, else the first role's (None: pact.yaml configures no agent)."""
    agents = settings.agents
    configs = [agents.default, *(getattr(agents, r.value) for r in Role)]
    return next((c.backend for c in configs if c is not None and c.backend), None)


def make_agent(
    name: str,
    *,
    replay_dir: Path | None,
    settings: Settings | None = None,
    sandbox: Sandbox | None = None,
) -> tuple[Agent, dict[str, str]]:
    """The agent ``name`` and the options a run records for it (never secrets).

    ``sandbox`` is the run's: a ``command`` backend runs its agent there.
    """
    if name not in AGENTS:
        raise InputError(f"unknown agent {name!r}; choose one of: {', '.join(AGENTS)}")
    if name == "replay":
        if replay_dir is None:
            raise InputError(
                "--agent replay needs --replay-dir DIR (a directory of artifacts); to run a "
                "real model, pass --agent anthropic|openai or configure agents: in pact.yaml "
                "(see README: Run on a real model)"
            )
        if not replay_dir.is_dir():
            raise InputError(f"--replay-dir {replay_dir}: {not_a_directory(replay_dir)}")
        try:
            empty = next(replay_dir.iterdir(), None) is None
        except OSError as exc:
            raise InputError(
                f"--replay-dir {replay_dir}: cannot be read ({exc.strerror})"
            ) from None
        if empty:
            raise InputError(
                f"--replay-dir {replay_dir}: is empty; the replay agent serves each "
                "component's artifacts from <component>/interface.json, tests/ and src/ there"
            )
    settings = settings or Settings()
    options = agent_options(
        name,
        settings.agents,
        replay_dir=str(replay_dir.resolve()) if replay_dir else None,
        prices=settings.prices,
    )
    return build_agent(name, options, sandbox=sandbox), options


def missing_api_keys(agents: AgentsSettings, name: str) -> list[str]:
    """One sentence per role whose provider needs a key that this environment lacks."""
    if name not in REAL_AGENTS:
        return []  # replay and noop call no provider, whatever pact.yaml configures
    missing: dict[str, list[str]] = {}
    for role in Role:
        if role is Role.TRACE_ANALYST and agents.trace_analyst is None:
            continue
        config = agents.for_role(role, name)
        if config.backend == "anthropic":
            variable = config.api_key_env or "ANTHROPIC_API_KEY"
        elif config.backend == "openai":
            if config.base_url and is_loopback(config.base_url):
                continue  # a server on this machine may need no key
            variable = config.api_key_env or "OPENAI_API_KEY"
        else:
            continue
        if not os.environ.get(variable, "").strip():
            missing.setdefault(f"{config.backend} key {variable}", []).append(role.value)
    return [
        f"{what} is not set (needed by {', '.join(roles)}): export it, or name another "
        "variable with api_key_env in pact.yaml"
        for what, roles in missing.items()
    ]


def make_sandbox(name: str) -> Sandbox:
    if name == "local":
        return LocalSandbox()
    if name == "docker":
        from pact_workers.sandbox.docker import DockerSandbox

        return DockerSandbox.from_env()
    raise InputError(f"unknown sandbox {name!r}; choose one of: {', '.join(SANDBOXES)}")
