"""``pact review``, ``approve`` and ``reject``: a human's side of the review queue."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Annotated

import typer

from scheduler.cli.app import EXIT_OK, app, out, print_json, say, user_errors
from scheduler.cli.options import JsonOption, ProjectArgument

ItemArg = Annotated[
    str, typer.Argument(help="The item: COMPONENT/PHASE, or a component with one item waiting")
]
NoteOption = Annotated[
    str,
    typer.Option(
        "--note", envvar="PACT_NOTE", help="Why (for pact reject, required: what to change)"
    ),
]
ByOption = Annotated[
    str | None,
    typer.Option("--by", envvar="PACT_REVIEWER", help="Who decides (default: the login name)"),
]
SandboxOption = Annotated[
    str, typer.Option(envvar="PACT_SANDBOX", help="Where the run goes on: local or docker")
]
ExecutorOption = Annotated[
    str,
    typer.Option(
        envvar="PACT_EXECUTOR",
        help="How this command carries the run on: local (in-process) or celery (the "
        "fleet); a scheduler service's run is handed back to the services instead",
    ),
]
BrokerOption = Annotated[
    str | None,
    typer.Option(
        envvar="PACT_BROKER_URL",
        help="redis:// URL of the fleet: a run a scheduler drives gets the decision there",
    ),
]


@app.command()
def review(
    project: ProjectArgument,
    as_json: JsonOption = False,
) -> None:
    """List the items that await a human's review: score, test results and diff."""
    from scheduler.gates.review import pending_reviews

    with user_errors():
        _, pending = pending_reviews(project_dir=project)
    if as_json:
        print_json([p.model_dump() for p in pending])
        raise typer.Exit(EXIT_OK)
    if not pending:
        say("no item awaits review")
    for entry in pending:
        say(
            f"{entry.item} (attempt {entry.attempt}, variety score {entry.score}): "
            f"{entry.tests}; files: {', '.join(entry.files) or 'none'}",
            label="awaiting review",
        )
        if entry.diff:
            out.print(entry.diff, markup=False, highlight=False, end="", soft_wrap=True)
    if pending:
        say(
            f"decide with: pact approve {project} ITEM [--note ...] or "
            f"pact reject {project} ITEM --note ..."
        )
    raise typer.Exit(EXIT_OK)


def _decide(
    project: Path,
    item: str,
    *,
    approved: bool,
    note: str,
    by: str | None,
    sandbox: str,
    executor: str,
    broker: str | None,
) -> None:
    from scheduler import commands
    from scheduler.cli.driving import drive_and_exit
    from scheduler.gates.fleet import ReviewRequest, hand_back
    from scheduler.gates.review import decide_review

    verb = "approved" if approved else "rejected"
    with user_errors():
        decided = decide_review(
            project_dir=project,
            item=item,
            approved=approved,
            note=note,
            by=by,
            broker_url=broker,
        )
        if isinstance(decided, ReviewRequest):
            say(
                f"{decided.item} {verb} by {decided.by}: sent to the scheduler that drives "
                "the run, which applies it at its next turn"
            )
            raise typer.Exit(EXIT_OK)
        what = f"{decided.component_id}/{decided.phase.value} {verb} by {decided.by}"
        run_id = hand_back(project, broker) if broker is not None else None
        if run_id is not None:
            say(f"{what}; run {run_id} is handed back to the scheduler services")
            raise typer.Exit(EXIT_OK)
    say(f"{what}; the run goes on")
    drive_and_exit(
        project,
        lambda listener, stop: commands.resume_run(
            project_dir=project,
            sandbox_name=sandbox,
            executor_name=executor,
            broker_url=broker,
            listener=listener,
            stop=stop,
        )[0],
    )


def _decision_command(*, approved: bool, doc: str) -> Callable[..., None]:
    """``pact approve`` (``approved``) or ``pact reject``: the same options, one way."""

    def command(
        project: ProjectArgument,
        item: ItemArg,
        note: NoteOption = "",
        by: ByOption = None,
        sandbox: SandboxOption = "local",
        executor: ExecutorOption = "local",
        broker: BrokerOption = None,
    ) -> None:
        _decide(
            project,
            item,
            approved=approved,
            note=note,
            by=by,
            sandbox=sandbox,
            executor=executor,
            broker=broker,
        )

    command.__doc__ = doc
    return command


app.command("approve")(
    _decision_command(
        approved=True, doc="Approve an item awaiting review: it is promoted and the run goes on."
    )
)
app.command("reject")(
    _decision_command(
        approved=False,
        doc="Reject an item awaiting review: the note goes to a new attempt as feedback.",
    )
)
