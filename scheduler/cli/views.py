"""What the CLI shows of a run: progress while it works, summary and details after."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from pact_workers.errors import InputError
from pact_workers.models.work import ItemStatus
from scheduler.budget import PhaseBudget
from scheduler.cli.app import EXIT_FAILED, EXIT_OK, err, out
from scheduler.events import Event, ItemDispatched, ItemFailed
from scheduler.project import ProjectDir
from scheduler.report import poisoned_items, summary_rows
from scheduler.settings import load_settings
from scheduler.state import RunState, RunStatus


class ProgressListener:
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


def progress_display() -> Progress:
    return Progress(
        TextColumn("[bold]{task.description:<40}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err,
        transient=True,
    )


def print_details(state: RunState, project_dir: Path, problems: list[str]) -> None:
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


def print_summary(state: RunState, project_dir: Path) -> None:
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


def exit_for(state: RunState) -> int:
    return EXIT_OK if state.status is RunStatus.COMPLETED else EXIT_FAILED
