"""The fleet's commands: ``worker``, ``scheduler``, ``submit``, ``workers``, ``runs``."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table
from rich.text import Text

from scheduler.budget import format_usd
from scheduler.cli.app import EXIT_BAD_INPUT, EXIT_OK, app, out, print_json, say, user_errors
from scheduler.cli.options import given_path


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
        int,
        typer.Option(
            envvar="PACT_CONCURRENCY",
            help="Attempts this worker runs at once: 1 to 1024 pool processes (or threads)",
        ),
    ] = 2,
    pool: Annotated[str, typer.Option(envvar="PACT_POOL", help="Celery pool")] = "prefork",
    loglevel: Annotated[
        str,
        typer.Option(
            envvar="PACT_LOGLEVEL",
            help="DEBUG, INFO, WARNING, ERROR, CRITICAL or FATAL (any case)",
        ),
    ] = "INFO",
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
    from scheduler import commands

    with user_errors():
        argv = commands.worker_argv(
            broker_url=broker,
            roles=roles,
            concurrency=concurrency,
            pool=pool,
            loglevel=loglevel,
            lease_ttl_s=lease_ttl,
        )
    if supervise:
        child = [sys.executable, "-m", "scheduler.cli", *sys.argv[1:], "--no-supervise"]
        raise typer.Exit(commands.supervise(child, log=lambda m: say(m, to_err=True)))
    with user_errors():
        commands.check_worker_queues(broker, roles)
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
        Path,
        typer.Option(
            parser=given_path, envvar="PACT_RUNS_DIR", help="Directory holding one project per run"
        ),
    ],
    max_in_flight: Annotated[
        str,
        typer.Option(
            envvar="PACT_MAX_IN_FLIGHT",
            help="Caps per role on the attempts in flight across all runs and schedulers, "
            "e.g. code_author=8,integrator=2 (default 16 each; give every scheduler the same)",
        ),
    ] = "",
    metrics_port: Annotated[
        int,
        typer.Option(
            envvar="PACT_METRICS_PORT",
            min=0,
            max=65535,
            help="Serve Prometheus metrics on this port (0: off)",
        ),
    ] = 0,
    metrics_addr: Annotated[
        str,
        typer.Option(envvar="PACT_METRICS_ADDR", help="Address to serve the metrics on"),
    ] = "127.0.0.1",
    lease_ttl: Annotated[
        float,
        typer.Option(
            "--lease-ttl",
            envvar="PACT_SCHEDULER_LEASE_TTL_S",
            help="Seconds a run's lease lives without renewal: how soon another scheduler "
            "takes over the runs of one that died",
        ),
    ] = 10.0,
    max_runs: Annotated[
        int,
        typer.Option(
            envvar="PACT_MAX_RUNS",
            help="Runs this scheduler drives at once; more wait for another scheduler",
        ),
    ] = 64,
) -> None:
    """Run a scheduler service: drive submitted runs over the fleet.

    Any number of them may run against one Redis and one shared --runs-dir: each run
    is driven by one at a time, and the runs of one that stops are taken by another.
    """
    from scheduler import commands

    with user_errors():
        service = commands.make_service(
            broker_url=broker,
            runs_dir=runs_dir,
            max_in_flight=max_in_flight,
            metrics_port=metrics_port,
            metrics_addr=metrics_addr,
            lease_ttl_s=lease_ttl,
            max_runs=max_runs,
        )
    service.install_signal_handlers()
    say(f"scheduler service {service.service_id} driving runs in {runs_dir}", to_err=True)
    service.run_forever()


@app.command()
def submit(
    trees: Annotated[
        list[Path], typer.Argument(parser=given_path, help="Tree files (JSON or YAML)")
    ],
    broker: BrokerOption,
    priority: Annotated[
        int, typer.Option(envvar="PACT_PRIORITY", help="0 (default) to 9: more gets more turns")
    ] = 0,
    agent: Annotated[str, typer.Option(envvar="PACT_AGENT", help="Agent backend")] = "replay",
    replay_dir: Annotated[
        Path | None,
        typer.Option(
            parser=given_path, envvar="PACT_REPLAY_DIR", help="Artifacts for the replay agent"
        ),
    ] = None,
    sandbox: Annotated[
        str, typer.Option(envvar="PACT_SANDBOX", help="Sandbox the workers use: local or docker")
    ] = "local",
    settings: Annotated[
        Path | None,
        typer.Option(
            parser=given_path,
            help="A pact.yaml whose agents: and prices: configure every run's agent",
        ),
    ] = None,
) -> None:
    """Submit trees to the scheduler service; each becomes a run with an id.

    Every valid tree is queued even when another is rejected (exit code 2 then).
    """
    from scheduler import commands

    with user_errors():
        queued, errors = commands.submit_batch(
            broker_url=broker,
            trees=trees,
            priority=priority,
            agent=agent,
            replay_dir=replay_dir,
            sandbox=sandbox,
            settings_path=settings,
        )
    for entry in queued:
        say(f"{entry.name}: queued as run {entry.run_id}")
    for error in errors:
        say(error, label="rejected", to_err=True)
    raise typer.Exit(EXIT_BAD_INPUT if errors else EXIT_OK)


@app.command()
def workers(
    broker: BrokerOption,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output")] = False,
) -> None:
    """List the fleet's live workers (their heartbeats) and the roles none serves."""
    from scheduler import commands

    with user_errors():
        found = commands.fleet_workers(broker)
    missing = commands.roles_without_workers(found)
    if as_json:
        print_json({"workers": found, "roles_without_workers": missing})
        raise typer.Exit(EXIT_OK)
    table = Table("worker", "roles", "host", "pid", "concurrency", "last heartbeat")
    now = time.time()
    for worker_id, info in sorted(found.items()):
        cells = (
            worker_id,
            ", ".join(info.get("roles", [])),
            str(info.get("hostname", "")),
            str(info.get("pid", "")),
            str(info.get("concurrency") or ""),
            f"{now - float(info.get('heartbeat_at', now)):.0f} s ago",
        )
        table.add_row(*(Text(c) for c in cells))
    out.print(table)
    if missing:
        say(", ".join(missing), label="no live worker serves", to_err=True)
    raise typer.Exit(EXIT_OK)


@app.command()
def runs(
    broker: BrokerOption,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output")] = False,
) -> None:
    """List the runs the scheduler services know: state, progress and owning scheduler.

    An active run's owner is the scheduler holding its lease; "(lease expired)" means
    its scheduler stopped and another is about to adopt it.
    """
    from scheduler import commands

    with user_errors():
        entries = commands.list_service_runs(broker_url=broker)
    if as_json:
        print_json([e.model_dump() for e in entries])
        raise typer.Exit(EXIT_OK)
    table = Table()
    columns = ("run", "tree", "state", "owner", "priority", "items", "cost", "submitted")
    for col in (*columns, "reason"):
        table.add_column(col)
    for e in entries:
        owner = e.owner or ("(lease expired)" if e.state == "active" else "")
        cells = (
            e.run_id,
            e.name,
            e.state,
            owner,
            str(e.priority),
            f"{e.items_done}/{e.items_total}",
            format_usd(e.cost_usd),
            e.submitted_at,
            e.reason[:60],
        )
        table.add_row(*(Text(c) for c in cells))
    out.print(table)
    raise typer.Exit(EXIT_OK)
