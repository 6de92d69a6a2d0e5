"""``pact verify``, ``pact import`` and ``pact plan``: the ways work enters the fleet
besides a hand-made tree (an existing Pact project, or a task description)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from pact_workers.errors import AgentError
from scheduler.cli.app import EXIT_FAILED, EXIT_OK, app, print_json, say, user_errors
from scheduler.cli.options import (
    AgentOption,
    BrokerOption,
    ExecutorOption,
    JsonOption,
    ReplayDirOption,
    SandboxOption,
    WorkersOption,
    given_path,
)

if TYPE_CHECKING:
    from pact_workers.models.interview import InterviewerOutput
    from scheduler.pactimport import Reproduction

PactDirArgument = Annotated[
    Path,
    typer.Argument(
        parser=given_path, help="A Pact project directory (the one holding .pact/), or its .pact/"
    ),
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
    as_json: JsonOption = False,
) -> None:
    """Re-verify a Pact project's implementations against its contract tests and compare
    the counts with those Pact recorded (exit 1 on any difference)."""
    from scheduler.commands.pactverify import verify_pact

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
        Path,
        typer.Option(
            parser=given_path, envvar="PACT_PROJECT", help="New directory the run is written to"
        ),
    ],
    agent: AgentOption = None,
    replay_dir: ReplayDirOption = None,
    workers: WorkersOption = 4,
    sandbox: SandboxOption = "local",
    executor: ExecutorOption = "local",
    broker: BrokerOption = None,
) -> None:
    """Start a run from an existing Pact project: what it produced is re-verified by the
    harness instead of re-authored; what fails or is missing is authored (the same as
    ``pact run --from-pact``)."""
    from scheduler.cli.importing import run_imported

    run_imported(
        pact_dir=pact_dir,
        project=project,
        agent=agent,
        replay_dir=replay_dir,
        workers=workers,
        sandbox=sandbox,
        executor=executor,
        broker=broker,
    )


@app.command()
def plan(
    task: Annotated[
        Path,
        typer.Argument(parser=given_path, help="The task description (a text or Markdown file)"),
    ],
    project: Annotated[
        Path,
        typer.Option(
            parser=given_path,
            envvar="PACT_PROJECT",
            help="Project directory: the plan goes to DIR/decomposition/, the run to DIR",
        ),
    ],
    answers: Annotated[
        Path | None,
        typer.Option(
            parser=given_path,
            envvar="PACT_ANSWERS",
            help="YAML file answering the interview (question id: answer)",
        ),
    ] = None,
    approve: Annotated[
        bool,
        typer.Option(
            "--approve",
            envvar="PACT_APPROVE",
            help="Answer the interview with the interviewer's assumptions",
        ),
    ] = False,
    agent: Annotated[
        str,
        typer.Option(
            envvar="PACT_AGENT", help="Who interviews and decomposes: replay, anthropic, openai"
        ),
    ] = "replay",
    replay_dir: ReplayDirOption = None,
    then_run: Annotated[
        bool,
        typer.Option("--run", envvar="PACT_PLAN_RUN", help="Run the tree once it is planned"),
    ] = False,
    workers: WorkersOption = 4,
    sandbox: SandboxOption = "local",
    executor: ExecutorOption = "local",
    broker: BrokerOption = None,
    timeout: Annotated[
        float,
        typer.Option(
            "--timeout",
            envvar="PACT_PLAN_TIMEOUT",
            help="Seconds a planning call may wait for a worker's answer (--executor celery)",
        ),
    ] = 900.0,
) -> None:
    """Interview and decompose a task into Pact's decomposition/interview.json and
    tree.json (answers from the terminal, --answers FILE or --approve); --run goes on."""
    from scheduler.cli.driving import drive_and_exit
    from scheduler.cli.planview import print_plan
    from scheduler.commands.plan import plan_task
    from scheduler.commands.runs import run_tree

    def show_interview(interview: InterviewerOutput) -> None:
        say(
            f"the interviewer asks {len(interview.questions)} questions "
            f"({len(interview.assumptions)} assumptions, {len(interview.risks)} risks)",
            to_err=True,
        )

    def ask(prompt: str) -> str:
        say(prompt.rstrip("> \n"), to_err=True)
        return input("> ")

    with user_errors(), planning_errors():
        planned = plan_task(
            task_path=task,
            project_dir=project,
            answers_path=answers,
            approve=approve,
            agent_name=agent,
            replay_dir=replay_dir,
            ask=ask,
            tell=lambda message: say(message, label="invalid", to_err=True),
            on_interview=show_interview,
            executor_name=executor,
            broker_url=broker,
            timeout_s=timeout,
        )
    print_plan(planned)
    if not then_run:
        say(f"next: pact run {planned.tree_path} --project {project}")
        raise typer.Exit(EXIT_OK)
    drive_and_exit(
        project,
        lambda listener, stop: run_tree(
            tree_path=planned.tree_path,
            project_dir=project,
            agent_name=agent,
            replay_dir=replay_dir,
            workers=workers,
            sandbox_name=sandbox,
            listener=listener,
            stop=stop,
            executor_name=executor,
            broker_url=broker,
        ),
    )


@contextmanager
def planning_errors() -> Iterator[None]:
    """A planning role that failed (a malformed interview, no valid tree, a provider
    error): the message, exit code 1, nothing written."""
    from scheduler.planning import PlanningError

    try:
        yield
    except (PlanningError, AgentError) as exc:
        say(exc, label="failed", to_err=True)
        raise typer.Exit(EXIT_FAILED) from None
