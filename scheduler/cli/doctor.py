"""``pact doctor``: check the environment and say how to fix it."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.text import Text

from scheduler.cli.app import EXIT_FAILED, EXIT_OK, app, out, user_errors
from scheduler.cli.options import given_path

#: How each status is marked (the same width, so that the names line up).
MARKS = {
    "ok": Text("ok     ", style="green"),
    "missing": Text("MISSING", style="red"),
    "skip": Text("skip   ", style="dim"),
    "warn": Text("warn   ", style="yellow"),
}


@app.command()
def doctor(
    project: Annotated[
        Path,
        typer.Argument(
            parser=given_path,
            help="Project directory (its pact.yaml is used)",
            envvar="PACT_PROJECT",
        ),
    ] = Path("."),
    sandbox: Annotated[
        str, typer.Option(envvar="PACT_SANDBOX", help="Check for this sandbox: local or docker")
    ] = "local",
    broker: Annotated[
        str | None, typer.Option(envvar="PACT_BROKER_URL", help="Also check this Redis")
    ] = None,
) -> None:
    """Check the environment, Docker, the sandbox image and Redis; say how to fix what is
    missing."""
    from scheduler import commands

    with user_errors():
        checks = commands.doctor_checks(project_dir=project, sandbox=sandbox, broker_url=broker)
    section = ""
    for check in checks:
        if check.section != section:
            out.print(Text(check.section, style="bold"))
            section = check.section
        line = Text("  ")
        line.append(MARKS[check.status])
        line.append(f" {check.what}: {check.detail}")
        out.print(line, soft_wrap=True)
    raise typer.Exit(EXIT_OK if all(c.passed for c in checks) else EXIT_FAILED)
