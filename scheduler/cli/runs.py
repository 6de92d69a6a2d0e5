"""``pact run``, ``status``, ``resume``, ``rebuild`` and ``demo``: one run at a time."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from pact_workers.errors import InputError
from scheduler import commands
from scheduler.cli.app import EXIT_FAILED, EXIT_OK, app, bad_input, err, out
from scheduler.cli.views import (
    ProgressListener,
    exit_for,
    print_details,
    print_summary,
    progress_display,
)
from scheduler.report import poisoned_items, summary_rows


@app.command()
def run(
    tree: Annotated[Path, typer.Argument(help="tree.json (Pact's format) or tree.yaml")],
    project: Annotated[
        Path, typer.Option("--project", envvar="PACT_PROJECT", help="Project directory to run into")
    ],
    agent: Annotated[str, typer.Option(envvar="PACT_AGENT", help="Agent backend")] = "replay",
    replay_dir: Annotated[
        Path | None, typer.Option(envvar="PACT_REPLAY_DIR", help="Artifacts for the replay agent")
    ] = None,
    workers: Annotated[int, typer.Option(envvar="PACT_WORKERS", help="Attempts run at once")] = 4,
    sandbox: Annotated[str, typer.Option(envvar="PACT_SANDBOX", help="Sandbox")] = "local",
    executor: Annotated[
        str, typer.Option(envvar="PACT_EXECUTOR", help="local (in-process) or celery (the fleet)")
    ] = "local",
    broker: Annotated[
        str | None, typer.Option(envvar="PACT_BROKER_URL", help="redis:// URL of the fleet")
    ] = None,
) -> None:
    """Run every component of TREE through contract, test and implementation."""
    if executor == "celery" and broker:
        _warn_about_the_fleet(broker)
    try:
        with progress_display() as progress:
            state = commands.run_tree(
                tree_path=tree,
                project_dir=project,
                agent_name=agent,
                replay_dir=replay_dir,
                workers=workers,
                sandbox_name=sandbox,
                listener=ProgressListener(progress),
                executor_name=executor,
                broker_url=broker,
            )
    except InputError as exc:
        raise bad_input(exc) from exc
    print_summary(state, project)
    raise typer.Exit(exit_for(state))


def _warn_about_the_fleet(broker: str) -> None:
    warning = commands.fleet_warning(broker)
    if warning:
        err.print(f"[yellow]warning:[/] {warning}", highlight=False, soft_wrap=True)


@app.command()
def status(
    project: Annotated[
        Path, typer.Argument(help="Project directory of a run", envvar="PACT_PROJECT")
    ],
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output")] = False,
) -> None:
    """Show a run's state, rebuilt from its audit log."""
    try:
        state, warnings = commands.read_status(project_dir=project)
        problems = commands.state_json_problems(project_dir=project)
    except InputError as exc:
        raise bad_input(exc) from exc
    if as_json:
        doc = {
            "run_id": state.run_id,
            "status": state.status.value,
            "pause_reason": state.pause_reason,
            "recommendation": state.recommendation,
            "fail_reason": state.fail_reason,
            "usage": state.usage.model_dump(),
            "spend_by_phase": state.spend_by_phase,
            "items": state.counts(),
            "components": summary_rows(state),
            "poisoned": dict(poisoned_items(state)),
            "pattern_type": state.pattern_type,
            "affected_components": state.affected_components,
            "inconsistencies": problems,
            "warnings": warnings,
        }
        out.print_json(json.dumps(doc))
    else:
        for warning in warnings:
            err.print(f"[yellow]warning:[/] {warning}", highlight=False)
        print_summary(state, project)
        print_details(state, project, problems)
    raise typer.Exit(EXIT_OK)


@app.command()
def resume(
    project: Annotated[
        Path,
        typer.Argument(
            help="Project directory of a failed, paused or interrupted run", envvar="PACT_PROJECT"
        ),
    ],
    from_phase: Annotated[
        str | None,
        typer.Option(
            "--from-phase",
            envvar="PACT_FROM_PHASE",
            help="Give failed items from this phase on a fresh start "
            "(contract, implement, integrate)",
        ),
    ] = None,
    agent: Annotated[
        str | None, typer.Option(envvar="PACT_AGENT", help="Agent backend (default: the run's)")
    ] = None,
    replay_dir: Annotated[
        Path | None,
        typer.Option(
            envvar="PACT_REPLAY_DIR", help="Artifacts for the replay agent (default: the run's)"
        ),
    ] = None,
    workers: Annotated[int, typer.Option(envvar="PACT_WORKERS", help="Attempts run at once")] = 4,
    sandbox: Annotated[str, typer.Option(envvar="PACT_SANDBOX", help="Sandbox")] = "local",
    executor: Annotated[
        str, typer.Option(envvar="PACT_EXECUTOR", help="local (in-process) or celery (the fleet)")
    ] = "local",
    broker: Annotated[
        str | None, typer.Option(envvar="PACT_BROKER_URL", help="redis:// URL of the fleet")
    ] = None,
) -> None:
    """Resume a failed, paused or interrupted run; verified work is kept."""
    try:
        with progress_display() as progress:
            state, problems = commands.resume_run(
                project_dir=project,
                from_phase=from_phase,
                agent_name=agent,
                replay_dir=replay_dir,
                workers=workers,
                sandbox_name=sandbox,
                executor_name=executor,
                broker_url=broker,
                listener=ProgressListener(progress),
            )
    except InputError as exc:
        raise bad_input(exc) from exc
    for problem in problems:
        out.print(f"[yellow]repaired on resume:[/] {problem}", highlight=False)
    print_summary(state, project)
    raise typer.Exit(exit_for(state))


@app.command()
def rebuild(
    project: Annotated[
        Path, typer.Argument(help="Project directory of a run", envvar="PACT_PROJECT")
    ],
    dry_run: Annotated[
        bool, typer.Option("--dry-run", envvar="PACT_DRY_RUN", help="Report only; write nothing")
    ] = False,
) -> None:
    """Rebuild state.json from the audit log and report what disagreed."""
    try:
        state, problems = commands.rebuild_run(project_dir=project, dry_run=dry_run)
    except InputError as exc:
        raise bad_input(exc) from exc
    for warning in state.warnings:
        err.print(f"[yellow]warning:[/] {warning}", highlight=False)
    for problem in problems:
        out.print(f"inconsistent: {problem}", highlight=False)
    if not problems:
        out.print("state.json matches the audit log and the disk")
    elif dry_run:
        out.print(f"{len(problems)} inconsistencies; run without --dry-run to rewrite state.json")
    else:
        out.print(f"state.json rewritten from the audit log ({len(problems)} inconsistencies)")
    raise typer.Exit(EXIT_FAILED if problems and dry_run else EXIT_OK)


@app.command()
def demo(
    directory: Annotated[
        Path | None, typer.Argument(help="New or empty directory (default: a fresh temporary one)")
    ] = None,
    workers: Annotated[int, typer.Option(envvar="PACT_WORKERS", help="Attempts run at once")] = 4,
) -> None:
    """Run the bundled example project with the replay agent and print a summary."""
    try:
        with progress_display() as progress:
            project_dir, state = commands.run_demo(
                directory=directory, workers=workers, listener=ProgressListener(progress)
            )
    except InputError as exc:
        raise bad_input(exc) from exc
    print_summary(state, project_dir)
    out.print(f"project directory: {project_dir}")
    raise typer.Exit(exit_for(state))
