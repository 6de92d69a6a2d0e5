"""The ``pact`` command line. Commands only parse options and call one function.

Exit codes: 0 the run is done, 1 the run failed (or paused), 2 bad input.
Every option can also be set with the ``PACT_*`` environment variable shown in
``--help``.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from pact_workers.errors import InputError
from pact_workers.models.work import ItemStatus
from scheduler import commands
from scheduler.budget import PhaseBudget
from scheduler.events import Event, ItemDispatched, ItemFailed
from scheduler.project import ProjectDir
from scheduler.report import poisoned_items, summary_rows
from scheduler.settings import load_settings
from scheduler.state import RunState, RunStatus

app = typer.Typer(
    name="pact",
    help="Run Pact decomposition trees: contract, test and implement every component.",
    no_args_is_help=True,
    add_completion=False,
)
out = Console()
err = Console(stderr=True)

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT = 0, 1, 2


def _bad_input(exc: Exception) -> typer.Exit:
    err.print(f"[bold red]error:[/] {exc}", highlight=False, soft_wrap=True)
    return typer.Exit(EXIT_BAD_INPUT)


class _ProgressListener:
    """Shows items finished out of all items while a run works."""

    def __init__(self, progress: Progress) -> None:
        self.progress = progress
        self.task: Any = None

    def __call__(self, event: Event, state: RunState) -> None:
        if self.task is None:
            self.task = self.progress.add_task("items", total=len(state.items))
        finished = sum(
            i.status in {ItemStatus.DONE, ItemStatus.FAILED, ItemStatus.POISONED}
            for i in state.items.values()
        )
        label = ""
        if isinstance(event, ItemDispatched):
            label = f"{event.component_id}/{event.phase.value} #{event.attempt}"
        elif isinstance(event, ItemFailed):
            label = f"{event.component_id}/{event.phase.value}: {event.decision}"
        self.progress.update(self.task, completed=finished, description=label or "items")


def _progress() -> Progress:
    return Progress(
        TextColumn("[bold]{task.description:<40}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err,
        transient=True,
    )


def _print_details(state: RunState, project_dir: Path, problems: list[str]) -> None:
    """What ``pact status`` adds to the summary: poison, suspension, spend, consistency."""
    for key, root in poisoned_items(state):
        out.print(
            f"poisoned: {key} (root cause: {root}: {state.items[root].last_error})", highlight=False
        )
    for key, item in state.items.items():
        if item.suspension is not None and item.status is not ItemStatus.DONE:
            out.print(
                f"suspended ({item.suspension.value}): {key}: {item.suspension_reason}",
                highlight=False,
            )
    try:
        settings = load_settings(ProjectDir(project_dir).settings_path)
    except InputError as exc:
        err.print(f"[yellow]warning:[/] {exc}", highlight=False)
        settings = None
    budget = PhaseBudget(
        phase_spend=dict(state.spend_by_phase),
        phase_caps=settings.budget.phase_caps if settings else {},
    )
    total = settings.budget_usd if settings else None
    table = Table(title="spend by phase", title_justify="left")
    for col in ("phase", "spent $", "cap $", "remaining $"):
        table.add_column(col)
    for phase, row in budget.phase_summary(total).items():
        table.add_row(
            phase,
            f"{row['spent']:.4f}",
            "" if row.get("cap") is None else f"{row['cap']:.4f}",
            "" if row.get("remaining") is None else f"{row['remaining']:.4f}",
        )
    out.print(table)
    if total is not None:
        out.print(f"total budget: ${state.usage.cost_usd:.4f} of ${total:.2f}")
    for problem in problems:
        out.print(f"[yellow]inconsistent:[/] {problem}", highlight=False)


def _print_summary(state: RunState, project_dir: Path) -> None:
    table = Table(title=f"run {state.run_id}: {state.status.value}", title_justify="left")
    for col in (
        "component",
        "contract",
        "test",
        "implement/integrate",
        "attempts",
        "tests",
        "cost $",
    ):
        table.add_column(col)
    for row in summary_rows(state):
        phases = list(row["phases"].values())
        attempts = "/".join(str(a) for a in row["attempts"].values())
        table.add_row(
            row["component_id"], *phases, attempts, row["tests"], f"{row['cost_usd']:.4f}"
        )
    out.print(table)
    usage = state.usage
    out.print(
        f"total: ${usage.cost_usd:.4f}, {usage.input_tokens + usage.output_tokens} tokens; "
        f"audit log: {project_dir / '.pact' / 'audit.jsonl'}"
    )
    if state.status is RunStatus.FAILED:
        out.print(f"[red]failed:[/] {state.fail_reason}")
        for row in summary_rows(state):
            if row["poisoned_by"]:
                out.print(f"  {row['component_id']}: poisoned by {row['poisoned_by']}")
    elif state.status is RunStatus.PAUSED:
        out.print(f"[yellow]paused:[/] {state.pause_reason}\n  {state.recommendation}")


def _exit_for(state: RunState) -> int:
    return EXIT_OK if state.status is RunStatus.COMPLETED else EXIT_FAILED


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
        with _progress() as progress:
            state = commands.run_tree(
                tree_path=tree,
                project_dir=project,
                agent_name=agent,
                replay_dir=replay_dir,
                workers=workers,
                sandbox_name=sandbox,
                listener=_ProgressListener(progress),
                executor_name=executor,
                broker_url=broker,
            )
    except InputError as exc:
        raise _bad_input(exc) from exc
    _print_summary(state, project)
    raise typer.Exit(_exit_for(state))


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
        raise _bad_input(exc) from exc
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
        _print_summary(state, project)
        _print_details(state, project, problems)
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
        with _progress() as progress:
            state, problems = commands.resume_run(
                project_dir=project,
                from_phase=from_phase,
                agent_name=agent,
                replay_dir=replay_dir,
                workers=workers,
                sandbox_name=sandbox,
                executor_name=executor,
                broker_url=broker,
                listener=_ProgressListener(progress),
            )
    except InputError as exc:
        raise _bad_input(exc) from exc
    for problem in problems:
        out.print(f"[yellow]repaired on resume:[/] {problem}", highlight=False)
    _print_summary(state, project)
    raise typer.Exit(_exit_for(state))


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
        raise _bad_input(exc) from exc
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
        with _progress() as progress:
            project_dir, state = commands.run_demo(
                directory=directory, workers=workers, listener=_ProgressListener(progress)
            )
    except InputError as exc:
        raise _bad_input(exc) from exc
    _print_summary(state, project_dir)
    out.print(f"project directory: {project_dir}")
    raise typer.Exit(_exit_for(state))


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
        raise _bad_input(exc) from exc
    section = ""
    for where, name, ok, detail in checks:
        if where != section:
            out.print(f"[bold]{where}[/]")
            section = where
        mark = "[green]ok[/]  " if ok else "[red]MISSING[/]"
        out.print(f"  {mark} {name}: {detail}", highlight=False, soft_wrap=True)
    raise typer.Exit(EXIT_OK if all(ok for _, _, ok, _ in checks) else EXIT_FAILED)


@app.command()
def worker(
    broker: Annotated[
        str, typer.Option(envvar="PACT_BROKER_URL", help="redis:// URL of the fleet's Redis")
    ],
    roles: Annotated[
        str,
        typer.Option(
            envvar="PACT_ROLES", help="Comma-separated roles whose queues this worker takes"
        ),
    ] = "contract_author,test_author,code_author,integrator",
    concurrency: Annotated[
        int, typer.Option(envvar="PACT_CONCURRENCY", help="Attempts this worker runs at once")
    ] = 2,
    pool: Annotated[str, typer.Option(envvar="PACT_POOL", help="Celery pool")] = "prefork",
    loglevel: Annotated[str, typer.Option(envvar="PACT_LOGLEVEL")] = "INFO",
    lease_ttl: Annotated[
        float,
        typer.Option(
            "--lease-ttl",
            envvar="PACT_LEASE_TTL_S",
            help="Seconds a running attempt's lease lives without renewal: how fast the "
            "scheduler notices this worker died",
        ),
    ] = 10.0,
    supervise: Annotated[
        bool,
        typer.Option(
            envvar="PACT_SUPERVISE",
            help="Restart the Celery worker (with backoff) whenever it exits without "
            "being stopped by a signal",
        ),
    ] = True,
) -> None:
    """Start a fleet worker: `celery worker` on the queues of the given roles."""
    try:
        argv = commands.worker_argv(
            broker_url=broker,
            roles=roles,
            concurrency=concurrency,
            pool=pool,
            loglevel=loglevel,
            lease_ttl_s=lease_ttl,
        )
    except InputError as exc:
        raise _bad_input(exc) from exc
    if supervise:
        child = [sys.executable, "-m", "scheduler.cli", *sys.argv[1:], "--no-supervise"]
        raise typer.Exit(commands.supervise(child, log=lambda m: err.print(m, highlight=False)))
    from pact_workers.app import app as celery_app

    # Celery's own exit status, so that a supervisor can tell a crash from a stop.
    raise typer.Exit(celery_app.start(argv) or 0)


BrokerOption = Annotated[
    str, typer.Option("--broker", envvar="PACT_BROKER_URL", help="redis:// URL of the fleet")
]


@app.command("scheduler")
def scheduler_service(
    broker: BrokerOption,
    runs_dir: Annotated[
        Path, typer.Option(envvar="PACT_RUNS_DIR", help="Directory holding one project per run")
    ],
    max_in_flight: Annotated[
        str,
        typer.Option(
            envvar="PACT_MAX_IN_FLIGHT",
            help="Global caps per role across runs, e.g. code_author=8,integrator=2 "
            "(default 16 each)",
        ),
    ] = "",
    metrics_port: Annotated[
        int, typer.Option(envvar="PACT_METRICS_PORT", help="Serve Prometheus metrics (0: off)")
    ] = 0,
    metrics_addr: Annotated[str, typer.Option(envvar="PACT_METRICS_ADDR")] = "127.0.0.1",
) -> None:
    """Run the scheduler service: drive every submitted run over the fleet."""
    try:
        service = commands.make_service(
            broker_url=broker,
            runs_dir=runs_dir,
            max_in_flight=max_in_flight,
            metrics_port=metrics_port,
            metrics_addr=metrics_addr,
        )
    except InputError as exc:
        raise _bad_input(exc) from exc
    service.install_signal_handlers()
    err.print(f"scheduler service {service.service_id} driving runs in {runs_dir}")
    service.run_forever()


@app.command()
def submit(
    trees: Annotated[list[Path], typer.Argument(help="Tree files (JSON or YAML)")],
    broker: BrokerOption,
    priority: Annotated[
        int, typer.Option(envvar="PACT_PRIORITY", help="0 (default) to 9: more gets more turns")
    ] = 0,
    agent: Annotated[str, typer.Option(envvar="PACT_AGENT", help="Agent backend")] = "replay",
    replay_dir: Annotated[
        Path | None, typer.Option(envvar="PACT_REPLAY_DIR", help="Artifacts for the replay agent")
    ] = None,
    sandbox: Annotated[
        str, typer.Option(envvar="PACT_SANDBOX", help="Sandbox the workers use: local or docker")
    ] = "local",
    settings: Annotated[
        Path | None,
        typer.Option(help="A pact.yaml whose agents: and prices: configure every run's agent"),
    ] = None,
) -> None:
    """Submit trees to the scheduler service; each becomes a run with an id.

    Every valid tree is queued even when another is rejected (exit code 2 then).
    """
    try:
        queued, errors = commands.submit_batch(
            broker_url=broker,
            trees=trees,
            priority=priority,
            agent=agent,
            replay_dir=replay_dir,
            sandbox=sandbox,
            settings_path=settings,
        )
    except InputError as exc:
        raise _bad_input(exc) from exc
    for entry in queued:
        out.print(f"{entry.name}: queued as run {entry.run_id}", highlight=False)
    for error in errors:
        err.print(f"[bold red]rejected:[/] {error}", highlight=False, soft_wrap=True)
    raise typer.Exit(EXIT_BAD_INPUT if errors else EXIT_OK)


@app.command()
def workers(
    broker: BrokerOption,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output")] = False,
) -> None:
    """List the fleet's live workers (their heartbeats) and the roles none serves."""
    try:
        found = commands.fleet_workers(broker)
    except InputError as exc:
        raise _bad_input(exc) from exc
    missing = commands.roles_without_workers(found)
    if as_json:
        out.print_json(json.dumps({"workers": found, "roles_without_workers": missing}))
        raise typer.Exit(EXIT_OK)
    table = Table("worker", "roles", "host", "pid", "concurrency", "last heartbeat")
    now = time.time()
    for worker_id, info in sorted(found.items()):
        table.add_row(
            worker_id,
            ", ".join(info.get("roles", [])),
            str(info.get("hostname", "")),
            str(info.get("pid", "")),
            str(info.get("concurrency") or ""),
            f"{now - float(info.get('heartbeat_at', now)):.0f} s ago",
        )
    out.print(table)
    if missing:
        err.print(f"[yellow]no live worker serves:[/] {', '.join(missing)}", highlight=False)
    raise typer.Exit(EXIT_OK)


@app.command()
def runs(
    broker: BrokerOption,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output")] = False,
) -> None:
    """List the runs the scheduler service knows, with their state."""
    try:
        entries = commands.list_service_runs(broker_url=broker)
    except InputError as exc:
        raise _bad_input(exc) from exc
    if as_json:
        out.print_json(json.dumps([e.model_dump() for e in entries]))
        raise typer.Exit(EXIT_OK)
    table = Table()
    for col in ("run", "tree", "state", "priority", "items", "cost $", "submitted", "reason"):
        table.add_column(col)
    for e in entries:
        table.add_row(
            e.run_id,
            e.name,
            e.state,
            str(e.priority),
            f"{e.items_done}/{e.items_total}",
            f"{e.cost_usd:.4f}",
            e.submitted_at,
            e.reason[:60],
        )
    out.print(table)
    raise typer.Exit(EXIT_OK)


def main() -> None:
    # Put this interpreter's directory first on PATH, so that the default
    # environment (python_path: python3, required_tools: [pytest]) finds the
    # environment pact is installed in even when it is not activated.
    bindir = os.path.dirname(sys.executable)
    path = os.environ.get("PATH", "")
    if bindir and bindir not in path.split(os.pathsep):
        os.environ["PATH"] = os.pathsep.join([bindir, path]) if path else bindir
    app()


if __name__ == "__main__":
    main()
