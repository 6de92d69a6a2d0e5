"""Starting a run from an existing Pact project, the one way behind both spellings:
``pact import PACT_DIR --project DIR`` and ``pact run --from-pact PACT_DIR --project
DIR``. What the Pact project produced is re-verified by the harness instead of
re-authored; what fails or is missing is authored."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import NoReturn

from scheduler.cli.app import say
from scheduler.cli.driving import drive_and_exit
from scheduler.cli.views import ProgressListener
from scheduler.commands.pactimport import ImportPlan, import_pact
from scheduler.state import RunState


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
) -> NoReturn:
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

    def drive(listener: ProgressListener, stop: threading.Event) -> RunState:
        return import_pact(
            pact_path=pact_dir,
            project_dir=project,
            agent_name=agent,
            replay_dir=replay_dir,
            workers=workers,
            sandbox_name=sandbox,
            listener=listener,
            stop=stop,
            on_plan=show,
            executor_name=executor,
            broker_url=broker,
        )[1]

    drive_and_exit(project, drive)
