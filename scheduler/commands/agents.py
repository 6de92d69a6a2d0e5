"""The agent and the sandbox a run uses, built from names and settings."""

from __future__ import annotations

from pathlib import Path

from pact_workers.agents.base import Agent
from pact_workers.agents.factory import AGENTS, agent_options, build_agent
from pact_workers.errors import InputError
from pact_workers.sandbox.base import Sandbox
from pact_workers.sandbox.local import LocalSandbox
from scheduler.settings import Settings

SANDBOXES = ("local", "docker")


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
            raise InputError("--agent replay needs --replay-dir DIR (a directory of artifacts)")
        if not replay_dir.is_dir():
            raise InputError(f"--replay-dir {replay_dir}: no such directory")
    settings = settings or Settings()
    options = agent_options(
        name,
        settings.agents,
        replay_dir=str(replay_dir.resolve()) if replay_dir else None,
        prices=settings.prices,
    )
    return build_agent(name, options, sandbox=sandbox), options


def make_sandbox(name: str) -> Sandbox:
    if name == "local":
        return LocalSandbox()
    if name == "docker":
        from pact_workers.sandbox.docker import DockerSandbox

        return DockerSandbox.from_env()
    raise InputError(f"unknown sandbox {name!r}; choose one of: {', '.join(SANDBOXES)}")
