"""The command-line options several commands share, declared once as ``Annotated``
types so that ``pact run``, ``import``, ``plan`` and ``resume`` spell and document
them alike (a command with a different meaning for one of them declares its own)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from pact_workers import files
from pact_workers.agents.factory import AGENTS
from pact_workers.errors import InputError


def given_path(text: str | Path) -> Path:
    """A path argument or option as typed (:func:`pact_workers.files.given_path`); a
    command's own default (a :class:`Path`, such as ``pact doctor``'s ``.``) as it is."""
    if isinstance(text, Path):
        return text
    try:
        return files.given_path(text)
    except InputError as exc:
        raise typer.BadParameter(str(exc)) from None


def given_text(text: str) -> str:
    """A project directory or run id as typed: an empty one is refused (see :func:`given_path`)."""
    if not text:
        raise typer.BadParameter("empty; give a project directory or run id (is a variable unset?)")
    return text


AgentOption = Annotated[
    str | None,
    typer.Option(
        envvar="PACT_AGENT",
        help=f"Who writes the artifacts: {', '.join(AGENTS)} "
        "(default: the backend pact.yaml's agents: names, else replay)",
    ),
]
SandboxOption = Annotated[
    str,
    typer.Option(
        envvar="PACT_SANDBOX",
        help="Where agents and tests run: local (a subprocess; isolates nothing) or docker",
    ),
]
ExecutorOption = Annotated[
    str, typer.Option(envvar="PACT_EXECUTOR", help="local (in-process) or celery (the fleet)")
]
BrokerOption = Annotated[
    str | None, typer.Option(envvar="PACT_BROKER_URL", help="redis:// URL of the fleet")
]
WorkersOption = Annotated[int, typer.Option(envvar="PACT_WORKERS", help="Attempts run at once")]
ReplayDirOption = Annotated[
    Path | None,
    typer.Option(
        parser=given_path, envvar="PACT_REPLAY_DIR", help="Artifacts the replay agent serves"
    ),
]
ProjectArgument = Annotated[
    Path,
    typer.Argument(parser=given_path, help="Project directory of a run", envvar="PACT_PROJECT"),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Machine-readable output")]
