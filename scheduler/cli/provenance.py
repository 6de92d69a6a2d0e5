"""How ``pact status`` shows provenance: drift, staleness, the latest retrospective and
run picture (user text only through :func:`~scheduler.cli.app.say`)."""

from __future__ import annotations

from scheduler.cli.app import say
from scheduler.cli.views import say_some
from scheduler.commands.provenance import ProvenanceReport


def print_provenance(report: ProvenanceReport) -> None:
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
