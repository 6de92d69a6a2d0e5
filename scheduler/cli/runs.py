"""``pact run``, ``status``, ``resume``, ``rebuild`` and ``demo``: one run at a time."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from pact_workers.agents.factory import AGENTS
from pact_workers.gcpause import collector_paused
from scheduler.cli.app import (
    EXIT_BAD_INPUT,
    EXIT_FAILED,
    EXIT_OK,
    app,
    print_json,
    say,
    user_errors,
)
from scheduler.cli.interrupt import interruptible
from scheduler.cli.options import (
    AgentOption,
    BrokerOption,
    ExecutorOption,
    JsonOption,
    ProjectArgument,
    ReplayDirOption,
    SandboxOption,
    WorkersOption,
    given_path,
)


@app.command()
def run(
    project: Annotated[
        Path,
        typer.Option(
            "--project",
            parser=given_path,
            envvar="PACT_PROJECT",
            help="Project directory to run into",
        ),
    ],
    tree: Annotated[
        Path | None,
        typer.Argument(
            parser=given_path, help="tree.json (Pact's format) or tree.yaml (not with --from-pact)"
        ),
    ] = None,
    agent: AgentOption = None,
    replay_dir: ReplayDirOption = None,
    workers: WorkersOption = 4,
    sandbox: SandboxOption = "local",
    executor: ExecutorOption = "local",
    broker: BrokerOption = None,
    dry_run: Annotated[
        bool,
        typer.Option(
            "--dry-run",
            envvar="PACT_DRY_RUN",
            help="Validate the tree, settings, agent and project directory; write nothing",
        ),
    ] = False,
    from_pact: Annotated[
        Path | None,
        typer.Option(
            "--from-pact",
            parser=given_path,
            envvar="PACT_FROM_PACT",
            help="Start from a Pact project (its directory or .pact/) instead of TREE: "
            "the same as pact import",
        ),
    ] = None,
) -> None:
    """Run every component of TREE through contract, test and implementation."""
    from scheduler import commands
    from scheduler.cli.importing import run_imported
    from scheduler.cli.views import ProgressListener, exit_for, print_summary, progress_display

    tree = _tree_or_pact(tree, from_pact, dry_run)
    if from_pact is not None:
        run_imported(
            pact_dir=from_pact,
            project=project,
            agent=agent,
            replay_dir=replay_dir,
            workers=workers,
            sandbox=sandbox,
            executor=executor,
            broker=broker,
        )
    options = {
        "tree_path": tree,
        "project_dir": project,
        "agent_name": agent,
        "replay_dir": replay_dir,
        "workers": workers,
        "sandbox_name": sandbox,
        "executor_name": executor,
        "broker_url": broker,
    }
    if dry_run:
        with user_errors():
            plan = commands.prepare_run(**options)  # type: ignore[arg-type]
        summary = plan.summary()
        for warning in summary["warnings"]:
            say(warning, label="warning", to_err=True)
        say(
            f"{tree}: {summary['components']} components ({summary['leaves']} leaves, depth "
            f"{summary['depth']}), {summary['work_items']} work items, "
            f"{summary['ready_at_start']} contracts ready at the start; agent "
            f"{summary['agent']}, sandbox {summary['sandbox']}, executor {summary['executor']}"
        )
        say(f"dry run: nothing was written to {project}")
        raise typer.Exit(EXIT_OK)
    if executor == "celery" and broker:
        _warn_about_the_fleet(broker)
    with user_errors():
        plan = commands.prepare_run(**options)  # type: ignore[arg-type]
        for warning in plan.warnings:
            say(warning, label="warning", to_err=True)
        with interruptible(project) as stop, progress_display() as progress:
            state = commands.run_plan(plan, listener=ProgressListener(progress), stop=stop)
    print_summary(state, project)
    raise typer.Exit(exit_for(state))


def _tree_or_pact(tree: Path | None, from_pact: Path | None, dry_run: bool) -> Path:
    """TREE, or the placeholder ``--from-pact`` stands for; exit 2 when both or
    neither is given, or when ``--dry-run`` is asked of an import."""
    problem = ""
    if tree is not None and from_pact is not None:
        problem = f"give TREE ({tree}) or --from-pact ({from_pact}), not both"
    elif tree is None and from_pact is None:
        problem = "give TREE (a tree.json or tree.yaml) or --from-pact PACT_DIR"
    elif from_pact is not None and dry_run:
        problem = "--dry-run does not apply to --from-pact; run pact verify PACT_DIR instead"
    if problem:
        say(problem, label="error", to_err=True)
        raise typer.Exit(EXIT_BAD_INPUT)
    return tree if tree is not None else Path()


def _warn_about_the_fleet(broker: str) -> None:
    from scheduler import commands

    warning = commands.fleet_warning(broker)
    if warning:
        say(warning, label="warning", to_err=True)


@app.command()
def status(
    project: ProjectArgument,
    as_json: JsonOption = False,
) -> None:
    """Show a run's state, rebuilt from its audit log."""
    # A one-shot reader of a possibly large state: the collector would only traverse
    # what is being built (see pact_workers.gcpause).
    with collector_paused():
        _show_status(project, as_json=as_json)
    raise typer.Exit(EXIT_OK)


def _show_status(project: Path, *, as_json: bool) -> None:
    from scheduler.audit import is_driven
    from scheduler.cli.provenance import print_provenance
    from scheduler.cli.views import print_details, print_summary
    from scheduler.commands.statusdoc import gather_status, status_document
    from scheduler.project import ProjectDir

    with user_errors():
        state, warnings, problems, provenance = gather_status(project)
    driven = is_driven(ProjectDir(project).audit_path)
    if as_json:
        print_json(
            status_document(
                project, state, warnings=warnings, problems=problems, provenance=provenance
            )
        )
    else:
        for warning in warnings:
            say(warning, label="warning", to_err=True)
        print_summary(state, project, driven=driven)
        print_details(state, project, problems)
        print_provenance(provenance)


@app.command()
def resume(
    project: Annotated[
        Path,
        typer.Argument(
            parser=given_path,
            help="Project directory of a failed, paused or interrupted run",
            envvar="PACT_PROJECT",
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
        str | None,
        typer.Option(
            envvar="PACT_AGENT", help=f"Agent: {', '.join(AGENTS)} (default: the run's own)"
        ),
    ] = None,
    replay_dir: Annotated[
        Path | None,
        typer.Option(
            parser=given_path,
            envvar="PACT_REPLAY_DIR",
            help="Artifacts for the replay agent (default: the run's)",
        ),
    ] = None,
    workers: WorkersOption = 4,
    sandbox: SandboxOption = "local",
    executor: ExecutorOption = "local",
    broker: BrokerOption = None,
    redo: Annotated[
        list[str] | None,
        typer.Option(
            "--redo",
            envvar="PACT_REDO",
            help="Implement this done component again (repeatable); its dependents' "
            "tests run again before the new version is promoted",
        ),
    ] = None,
) -> None:
    """Resume a failed, paused or interrupted run; verified work is kept."""
    from scheduler import commands
    from scheduler.cli.views import ProgressListener, exit_for, print_summary, progress_display

    with user_errors(), interruptible(project) as stop, progress_display() as progress:
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
            stop=stop,
            redo=redo or (),
        )
    for problem in problems:
        say(problem, label="repaired on resume")
    print_summary(state, project)
    raise typer.Exit(exit_for(state))


@app.command()
def rebuild(
    project: ProjectArgument,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", envvar="PACT_DRY_RUN", help="Report only; write nothing")
    ] = False,
    force: Annotated[
        bool,
        typer.Option(
            "--force",
            help="Rewrite state.json even when it records more than the audit log replays to",
        ),
    ] = False,
) -> None:
    """Rebuild state.json from the audit log and report what disagreed."""
    from scheduler import commands

    with user_errors():
        state, problems = commands.rebuild_run(project_dir=project, dry_run=dry_run, force=force)
    for warning in state.warnings:
        say(warning, label="warning", to_err=True)
    for problem in problems:
        say(problem, label="inconsistent")
    if not problems:
        say("state.json matches the audit log and the disk")
    elif dry_run:
        say(f"{len(problems)} inconsistencies; run without --dry-run to rewrite state.json")
    else:
        say(f"state.json rewritten from the audit log ({len(problems)} inconsistencies)")
    raise typer.Exit(EXIT_FAILED if problems and dry_run else EXIT_OK)


@app.command()
def demo(
    directory: Annotated[
        Path | None,
        typer.Argument(
            parser=given_path, help="New or empty directory (default: a fresh temporary one)"
        ),
    ] = None,
    workers: WorkersOption = 4,
    from_task: Annotated[
        bool,
        typer.Option(
            "--from-task",
            envvar="PACT_DEMO_FROM_TASK",
            help="Start from the example's task: interview, decomposition, then the run",
        ),
    ] = False,
) -> None:
    """Run the bundled example project with the replay agent and print a summary."""
    from scheduler import commands
    from scheduler.cli.planview import print_plan
    from scheduler.cli.views import ProgressListener, exit_for, print_summary, progress_display

    with user_errors():
        commands.check_workers(workers)  # before a temporary directory is made
        target = commands.demo_directory(directory)
        say(f"project directory: {target}", to_err=True)
        with interruptible(target) as stop, progress_display() as progress:
            project_dir, state = commands.run_demo(
                directory=target,
                workers=workers,
                listener=ProgressListener(progress),
                stop=stop,
                from_task=from_task,
                on_plan=print_plan,
            )
    print_summary(state, project_dir)
    say(f"project directory: {project_dir}")
    raise typer.Exit(exit_for(state))
