"""``pact retrospective``, ``pact timeline``, and how ``pact status`` shows provenance:
drift, staleness, the latest retrospective and run picture (user text only through
:func:`~scheduler.cli.app.say`)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from scheduler.budget import format_usd
from scheduler.cli.app import EXIT_OK, app, print_json, say, user_errors
from scheduler.cli.options import given_path

if TYPE_CHECKING:
    from scheduler.commands.provenance import ProvenanceReport


def print_provenance(report: ProvenanceReport) -> None:
    from scheduler.cli.views import say_some

    for severity in ("error", "warning"):
        say_some(
            (f.message for f in report.drift if f.severity == severity),
            label=f"drift {severity}",
            limit=50,
        )
    for status in ("stale", "aging"):
        say_some(
            (f"{c.component_id}: {c.reason}" for c in report.staleness if c.status == status),
            label=status,
            limit=50,
        )
    if report.retrospective:
        say(f"retrospective: {report.retrospective}")
    if report.timeline:
        say(f"timeline: {report.timeline}")


@app.command()
def retrospective(
    project: Annotated[
        Path,
        typer.Argument(parser=given_path, help="Project directory of a run", envvar="PACT_PROJECT"),
    ],
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output")] = False,
) -> None:
    """Show a run's retrospective: cost, duration, failure patterns and lessons."""
    from scheduler.cli.views import say_some
    from scheduler.commands.provenance import show_retrospective

    with user_errors():
        retro, saved = show_retrospective(project_dir=project)
    if as_json:
        print_json({**retro.model_dump(mode="json"), "saved": saved})
        raise typer.Exit(EXIT_OK)
    say(
        f"run {retro.run_id} ({retro.status or 'unknown'}): {retro.components_count} "
        f"components, {format_usd(retro.total_cost)}, {retro.total_duration_seconds:.1f}s"
    )
    if not saved:
        say("the run has not ended: generated now from the log, not saved", label="note")
    say(f"contracts revised: {retro.plan_revisions}")
    cid, tests = retro.largest_test_suite
    if cid:
        say(f"largest test suite: {cid} ({tests} tests)")
    cid, errors = retro.most_error_cases
    if cid:
        say(f"most error cases: {cid} ({errors})")
    costly = sorted(retro.cost_distribution.items(), key=lambda kv: -kv[1])[:5]
    say("costliest components: " + ", ".join(f"{c} {format_usd(v)}" for c, v in costly))
    say_some(retro.failure_patterns, label="pattern", limit=20)
    if retro.would_have_blocked:
        calls = sum(b.count for b in retro.would_have_blocked)
        say(f"gates (advisory): {calls} work call(s) would have blocked")
    say_some(
        (f"{b.item} x{b.count}: {b.reason}" for b in retro.would_have_blocked),
        label="would have blocked",
        limit=50,
    )
    say_some(retro.lessons, label="lesson", limit=20)
    raise typer.Exit(EXIT_OK)


@app.command()
def timeline(
    project: Annotated[
        Path,
        typer.Argument(parser=given_path, help="Project directory of a run", envvar="PACT_PROJECT"),
    ],
    output: Annotated[
        Path,
        typer.Option(
            "-o",
            "--output",
            parser=given_path,
            envvar="PACT_TIMELINE_OUTPUT",
            help="Picture to write: FILE.svg, FILE.png or FILE.html",
        ),
    ],
) -> None:
    """Draw a run as a Gantt chart: a lane per worker slot, a bar per attempt."""
    from scheduler.commands.timeline import draw_timeline

    with user_errors():
        pic = draw_timeline(project_dir=project, output=output)
    lost = sum(1 for b in pic.bars if b.outcome in ("lost", "dropped"))
    say(
        f"{output}: {len(pic.bars)} attempts on {len(pic.lanes)} lanes"
        + (f" ({lost} lost or dropped)" if lost else "")
    )
    say(pic.summary())
    raise typer.Exit(EXIT_OK)
