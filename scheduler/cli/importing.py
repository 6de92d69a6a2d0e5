"""Starting a run from an existing Pact project, the one way behind both spellings:
``pact import PACT_DIR --project DIR`` and ``pact run --from-pact PACT_DIR --project
DIR``. What the Pact project produced is re-verified by the harness instead of
re-authored; what fails or is missing is authored."""

from __future__ import annotations

from pathlib import Path

import typer

from scheduler.cli.app import say, user_errors
from scheduler.cli.interrupt import interruptible
from scheduler.cli.views import ProgressListener, exit_for, print_summary, progress_display
from scheduler.commands.pactimport import ImportPlan, import_pact


def run_imported(
    *,
    pact_dir: Path,
    project: Path,
    agent: str | None,
    replay_dir: Path | None,
    workers: int,
    sandbox: str,
    executor: str,
    broker: str | None,
) -> None:
    """Import ``pact_dir`` into a run in ``project``, drive it and exit with its code.

    Raises:
        typer.Exit: always; 2 on bad input (nothing written), else the run's code.
    """

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
            executor_name=executor,
            broker_url=broker,
        )
    print_summary(state, project)
    raise typer.Exit(exit_for(state))
