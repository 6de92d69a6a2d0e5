"""``pact doctor``: check the environment and say how to fix it."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from pact_workers.errors import InputError
from scheduler import commands
from scheduler.cli.app import EXIT_FAILED, EXIT_OK, app, bad_input, out


@app.command()
def doctor(
    project: Annotated[
        Path,
        typer.Argument(help="Project directory (its pact.yaml is used)", envvar="PACT_PROJECT"),
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
    try:
        checks = commands.doctor_checks(project_dir=project, sandbox=sandbox, broker_url=broker)
    except InputError as exc:
        raise bad_input(exc) from exc
    section = ""
    for where, name, ok, detail in checks:
        if where != section:
            out.print(f"[bold]{where}[/]")
            section = where
        mark = "[green]ok[/]  " if ok else "[red]MISSING[/]"
        out.print(f"  {mark} {name}: {detail}", highlight=False, soft_wrap=True)
    raise typer.Exit(EXIT_OK if all(ok for _, _, ok, _ in checks) else EXIT_FAILED)
