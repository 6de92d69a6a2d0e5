"""What the CLI shows of a run: progress while it works, summary and details after.

User text (ids, paths, error messages) goes into tables as :class:`Text` and onto
lines through :func:`say`, never as markup. Long lists are cut at
:data:`MAX_ROWS` rows with a line saying how many more there are: a run of ten
thousand components must answer in seconds, and ``--json`` has everything.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from pact_workers.errors import InputError
from pact_workers.models.work import ItemStatus
from scheduler.budget import PhaseBudget, format_usd
from scheduler.cache import cache_report
from scheduler.cli.app import EXIT_FAILED, EXIT_OK, err, out, say
from scheduler.commands.agents import NOOP_NOTE
from scheduler.events import Event, ItemDispatched, ItemFailed
from scheduler.gates.handling import awaiting_review
from scheduler.gates.report import gate_lines
from scheduler.gates.review import EXIT_AWAITING_REVIEW
from scheduler.pactimport.report import import_report
from scheduler.project import ProjectDir
from scheduler.regression.report import regression_lines
from scheduler.report import poisoned_items, summary_rows
from scheduler.settings import load_settings
from scheduler.state import RunState, RunStatus
from scheduler.tally import finished
from scheduler.validation import Rule, Severity

#: Rows of a table or lines of a list shown before "... and N more".
MAX_ROWS = 200


class ProgressListener:
    """Shows items finished out of all items while a run works (at most ten times a
    second)."""

    def __init__(self, progress: Progress, *, every_s: float = 0.1) -> None:
        self.progress = progress
        self.task: Any = None
        self.every_s = every_s
        self._shown_at = 0.0

    def __call__(self, event: Event, state: RunState) -> None:
        if self.task is None:
            self.task = self.progress.add_task("items", total=len(state.items))
        now = time.monotonic()
        if now - self._shown_at < self.every_s:
            return
        self._shown_at = now
        label = ""
        if isinstance(event, ItemDispatched):
            label = f"{event.component_id}/{event.phase.value} #{event.attempt}"
        elif isinstance(event, ItemFailed):
            label = f"{event.component_id}/{event.phase.value}: {event.decision}"
        # The description is a markup template: escape the ids it shows.
        label = (label or "items").replace("[", r"\[")
        self.progress.update(self.task, completed=finished(state), description=label)


def progress_display() -> Progress:
    return Progress(
        TextColumn("[bold]{task.description:<40}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err,
        transient=True,
    )


def say_some(lines: Iterable[str], *, label: str = "", limit: int = MAX_ROWS) -> None:
    """Print up to ``limit`` lines, then how many were left out."""
    shown = 0
    extra = 0
    for line in lines:
        if shown < limit:
            say(line, label=label)
            shown += 1
        else:
            extra += 1
    if extra:
        say(f"... and {extra} more (`pact status DIR --json` lists them all)")


def print_details(state: RunState, project_dir: Path, problems: list[str]) -> None:
    """What ``pact status`` adds to the summary: poison, suspension, spend, consistency."""
    say_some(
        (
            f"{key} (root cause: {root}: {state.items[root].last_error})"
            for key, root in poisoned_items(state)
        ),
        label="poisoned",
    )
    say_some(
        (
            f"suspended ({item.suspension.value}): {key}: {item.suspension_reason}"
            for key, item in state.items.items()
            if item.suspension is not None and item.status is not ItemStatus.DONE
        ),
    )
    print_validation(state)
    say_some(gate_lines(state), label="gates")
    say_some(regression_lines(state), label="regressions")
    try:
        settings = load_settings(ProjectDir(project_dir).settings_path)
    except InputError as exc:
        say(exc, label="warning", to_err=True)
        settings = None
    budget = PhaseBudget(
        phase_spend=dict(state.spend_by_phase),
        phase_caps=settings.budget.phase_caps if settings else {},
    )
    total = settings.budget_usd if settings else None
    table = Table(title="spend by phase", title_justify="left")
    for col in ("phase", "spent", "cap", "remaining"):
        table.add_column(col)
    for phase, row in budget.phase_summary(total).items():
        table.add_row(
            Text(phase),
            format_usd(row["spent"]),
            "" if row.get("cap") is None else format_usd(row["cap"]),
            "" if row.get("remaining") is None else format_usd(row["remaining"]),
        )
    out.print(table)
    if total is not None:
        say(f"total budget: {format_usd(state.usage.cost_usd)} of {format_usd(total)}")
    say_some(problems, label="inconsistent", limit=20)


def print_validation(state: RunState) -> None:
    """Each contract's latest check: dependency names read as other ids, then its
    errors (why an attempt was rejected) and warnings (locality, quality)."""
    checks = sorted(state.validation.items())
    say_some(
        (f"{cid}: {correction}" for cid, check in checks for correction in check.corrections),
        label="name corrected",
    )
    for severity in (Severity.ERROR, Severity.WARNING):
        say_some(
            (
                f"{cid} (contract attempt {check.attempt}): {finding}"
                for cid, check in checks
                for finding in check.findings
                if finding.severity is severity and finding.rule is not Rule.NAME_CORRECTION
            ),
            label=severity.value,
        )


def print_summary(state: RunState, project_dir: Path, *, driven: bool | None = None) -> None:
    """The run's table (one row per component) and how it ended.

    ``driven``: whether a pact process drives the run now (None: not known); an
    active run that nothing drives was interrupted.
    """
    status = state.status.value
    if state.status is RunStatus.ACTIVE and driven is False:
        status = "interrupted"
    table = Table(title=Text(f"run {state.run_id}: {status}"), title_justify="left")
    for col in ("component", "contract", "test", "implement/integrate", "attempts", "tests"):
        table.add_column(col)
    table.add_column("cost", justify="right")
    cache = cache_report(state)
    cached = bool(cache.hits or cache.dropped)
    if cached:  # only runs the action cache served show its columns
        table.add_column("cache")
        table.add_column("saved", justify="right")
    rows = summary_rows(state)
    # With many components, the ones that need attention first.
    shown = (
        rows
        if len(rows) <= MAX_ROWS
        else sorted(rows, key=lambda r: all(p == "done" for p in r["phases"].values()))[:MAX_ROWS]
    )
    for row in shown:
        table.add_row(
            Text(row["component_id"]),
            *row["phases"].values(),
            "/".join(str(a) for a in row["attempts"].values()),
            row["tests"],
            format_usd(row["cost_usd"]),
            *(_cache_cells(state, row["component_id"], row["phases"]) if cached else ()),
        )
    out.print(table)
    if len(rows) > len(shown):
        counts = ", ".join(f"{n} {s}" for s, n in sorted(state.counts().items()))
        say(
            f"... {len(rows) - len(shown)} more components not shown (items: {counts}); "
            "`pact status DIR --json` lists them all"
        )
    usage = state.usage
    say(
        f"total: {format_usd(usage.cost_usd)}, {usage.input_tokens + usage.output_tokens} "
        f"tokens; audit log: {project_dir / '.pact' / 'audit.jsonl'}"
    )
    imported = import_report(state, project_dir / ".pact")
    if imported is not None:
        say(imported.line(), label="imported")
    if cached:
        say(
            f"{cache.hits} items served from the action cache ({cache.mode.value}): "
            f"{cache.hits} agent calls, {format_usd(cache.saved_usd)} and "
            f"{cache.saved_tokens} tokens saved; {cache.dropped} cached results dropped",
            label="cache",
        )
    if state.agent == "noop":
        say(NOOP_NOTE, label="note")
    if state.status is RunStatus.FAILED:
        say(state.fail_reason, label="failed")
        say_some(
            f"  {row['component_id']}: poisoned by {row['poisoned_by']}"
            for row in rows
            if row["poisoned_by"]
        )
    elif state.status is RunStatus.PAUSED:
        say(f"{state.pause_reason}\n  {state.recommendation}", label="paused")
    elif status == "interrupted":
        say(
            f"no pact process is driving this run; continue it with `pact resume {project_dir}`",
            label="interrupted",
        )


def _cache_cells(state: RunState, component_id: str, phases: Iterable[str]) -> tuple[str, str]:
    """A component's row in the cache columns: per phase ``hit``, ``dropped`` or ``-``,
    and what its hits saved."""
    items = [state.item(component_id, phase) for phase in phases]
    marks = "/".join(item.cache or "-" for item in items)
    saved = sum(item.saved.cost_usd for item in items if item.cache == "hit")
    return marks, format_usd(saved)


def exit_for(state: RunState) -> int:
    if state.status is RunStatus.PAUSED and awaiting_review(state):
        return EXIT_AWAITING_REVIEW  # nothing failed: a human has to decide
    return EXIT_OK if state.status is RunStatus.COMPLETED else EXIT_FAILED
