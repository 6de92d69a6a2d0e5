"""``pact cancel``: cancel a run (or some of its items), embedded or on the fleet."""

from __future__ import annotations

import getpass
from pathlib import Path
from typing import Annotated

import typer

from scheduler.cli.app import EXIT_OK, app, print_json, say, user_errors
from scheduler.cli.options import given_text


def _default_user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "unknown"


@app.command()
def cancel(
    project: Annotated[
        str,
        typer.Argument(
            parser=given_text,
            help="Project directory of the run (with --broker: the run's id)",
            envvar="PACT_PROJECT",
        ),
    ],
    items: Annotated[
        list[str] | None,
        typer.Argument(help="Only these items: COMPONENT or COMPONENT/PHASE (default: all)"),
    ] = None,
    by: Annotated[
        str | None,
        typer.Option(envvar="PACT_CANCEL_BY", help="Who cancels (default: the login name)"),
    ] = None,
    reason: Annotated[str, typer.Option(envvar="PACT_CANCEL_REASON", help="Why")] = "",
    wait_s: Annotated[
        float,
        typer.Option(
            "--wait-s",
            envvar="PACT_CANCEL_WAIT_S",
            min=0,
            help="How long to wait for the process driving the run to apply it",
        ),
    ] = 30.0,
    broker: Annotated[
        str | None,
        typer.Option(
            envvar="PACT_BROKER_URL",
            help="redis:// URL of the fleet: cancel the fleet run whose id is given",
        ),
    ] = None,
    json_output: Annotated[
        bool, typer.Option("--json", envvar="PACT_JSON", help="Print JSON")
    ] = False,
) -> None:
    """Cancel a run (every unfinished item) or the named items: their attempts are fenced
    (a late result is dropped); `pact resume` carries the run on."""
    from scheduler.lifecycle.cancel import cancel_fleet_run, cancel_run

    who = by or _default_user()
    if broker is not None:
        with user_errors():
            outcome = cancel_fleet_run(
                broker_url=broker,
                run_id=project,
                by=who,
                reason=reason,
                items=items or (),
                wait_s=wait_s,
            )
        if json_output:
            print_json({"outcome": outcome, "run_id": project, "by": who})
        elif outcome == "cancelled":
            say(f"cancelled by {who}: the scheduler driving run {project} took the request")
        else:
            say(
                f"requested: run {project} is cancelled when its scheduler takes it",
                label="warning",
            )
        raise typer.Exit(EXIT_OK)
    with user_errors():
        outcome, event = cancel_run(
            project_dir=Path(project),
            by=who,
            reason=reason,
            items=items or (),
            wait_s=wait_s,
        )
    if json_output:
        print_json({"outcome": outcome, **event.model_dump(mode="json")})
    else:
        names = ", ".join(f"{c}/{p.value}" for c, p in event.items) or "nothing left to cancel"
        if outcome == "cancelled":
            say(f"cancelled by {event.by}: {names}")
        else:
            say(
                f"requested: the process driving {project} cancels {names} at its next turn",
                label="warning",
            )
    raise typer.Exit(EXIT_OK)
