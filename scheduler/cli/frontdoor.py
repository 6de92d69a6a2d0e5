"""``pact verify``, ``pact import`` and ``pact plan``: the ways work enters the fleet
besides a hand-made tree (an existing Pact project, or a task description)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from scheduler.cli.app import EXIT_FAILED, EXIT_OK, app, print_json, say, user_errors
from scheduler.cli.interrupt import interruptible
from scheduler.cli.runs import AgentOption, SandboxOption, WorkersOption
from scheduler.cli.views import ProgressListener, exit_for, print_summary, progress_display
from scheduler.commands.pactimport import ImportPlan, import_pact
from scheduler.commands.pactverify import verify_pact
from scheduler.pactimport import Reproduction

PactDirArgument = Annotated[
    Path,
    typer.Argument(help="A Pact project directory (the one holding .pact/), or its .pact/"),
]


@app.command()
def verify(
    pact_dir: PactDirArgument,
    sandbox: SandboxOption = "local",
    timeout: Annotated[
        float,
        typer.Option(
            "--timeout", envvar="PACT_VERIFY_TIMEOUT", help="Seconds one component's tests may run"
        ),
    ] = 300.0,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output")] = False,
) -> None:
    """Re-verify a Pact project's implementations against its contract tests and compare
    the counts with those Pact recorded (exit 1 on any difference)."""

    def show(found: Reproduction) -> None:
        if as_json:
            return
        mark = "ok" if found.match else "DIFFERS"
        say(f"{found.component}: recorded {found.recorded}; reproduced {found.reproduced}: {mark}")

    with user_errors():
        found = verify_pact(
            path=pact_dir, sandbox_name=sandbox, timeout_s=timeout, on_component=show
        )
    differ = [f for f in found if not f.match]
    if as_json:
        print_json([f.as_json() for f in found])
    else:
        say(
            f"{len(found)} components verified: {len(found) - len(differ)} reproduce their "
            f"recorded counts, {len(differ)} differ"
        )
    raise typer.Exit(EXIT_FAILED if differ else EXIT_OK)


@app.command("import")
def import_(
    pact_dir: PactDirArgument,
    project: Annotated[
        Path, typer.Option(envvar="PACT_PROJECT", help="New directory the run is written to")
    ],
    agent: AgentOption = None,
    replay_dir: Annotated[
        Path | None,
        typer.Option(envvar="PACT_REPLAY_DIR", help="Artifacts the replay agent serves"),
    ] = None,
    workers: WorkersOption = 4,
    sandbox: SandboxOption = "local",
) -> None:
    """Start a run from an existing Pact project: what it produced is re-verified by the
    harness instead of re-authored; what fails or is missing is authored."""

    def show(plan: ImportPlan) -> None:
        for finding in plan.findings:
            say(finding, label=f"contract {finding.severity}")
        say(
            f"importing {len(plan.artifacts)} artifacts of {len(plan.tree.nodes)} components "
            f"from {plan.project.pact_dir}",
            to_err=True,
        )

    with user_errors(), interruptible(project) as stop, progress_display() as progress:
        _, state = import_pact(
            pact_path=pact_dir,
            project_dir=project,
            agent_name=agent,
            replay_dir=replay_dir,
            workers=workers,
            sandbox_name=sandbox,
            listener=ProgressListener(progress),
            stop=stop,
            on_plan=show,
        )
    print_summary(state, project)
    raise typer.Exit(exit_for(state))
