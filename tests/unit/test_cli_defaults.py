"""Every command's options and arguments, parsed with nothing given: each default goes
through its parameter's parser as a user's value does, so a default the parser cannot
take would fail every call that leaves it out (``pact doctor`` with no directory did)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import typer.main

# Typer parses with its own copy of click: its exception, not click's.
from typer._click.exceptions import MissingParameter

from scheduler.cli import app


def commands(group: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    for name, command in group.commands.items():
        if hasattr(command, "commands"):
            yield from commands(command, f"{prefix}{name} ")
        else:
            yield f"{prefix}{name}", command


ALL = sorted(commands(typer.main.get_command(app)), key=lambda pair: pair[0])


def test_the_cli_has_its_commands() -> None:
    names = [name for name, _ in ALL]
    assert {"run", "resume", "status", "doctor", "worker", "scheduler", "mcp"} <= set(names)


@pytest.mark.parametrize("name,command", ALL, ids=[name for name, _ in ALL])
def test_each_commands_defaults_parse(name: str, command: Any) -> None:
    try:
        with command.make_context(name, []) as ctx:
            assert isinstance(ctx.params, dict)
    except MissingParameter:
        pass  # an argument the user must give: refused with exit 2, as it should be
