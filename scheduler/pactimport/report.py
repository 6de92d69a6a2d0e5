"""What an import did for a run (``pact status``): which of the Pact project's artifacts
the harness verified and the run re-used at cost 0, which it rejected (an agent
authored them instead), and which are still waiting."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from scheduler.pactimport.manifest import read_manifest
from scheduler.state import RunState, item_key

__all__ = ["ImportReport", "import_json", "import_report"]


@dataclass(frozen=True)
class ImportReport:
    pact_dir: str
    reused: list[str]
    rejected: list[str]
    waiting: list[str]

    def line(self) -> str:
        total = len(self.reused) + len(self.rejected) + len(self.waiting)
        return (
            f"{len(self.reused)} of {total} artifacts of {self.pact_dir} verified and "
            f"re-used at cost 0; {len(self.rejected)} rejected by the harness and authored "
            f"again; {len(self.waiting)} not offered yet"
        )

    def to_json(self) -> dict[str, object]:
        return {
            "from": self.pact_dir,
            "reused": self.reused,
            "rejected": self.rejected,
            "waiting": self.waiting,
        }


def import_report(state: RunState, pact: Path) -> ImportReport | None:
    """The import of the run whose ``.pact/`` is ``pact`` (None: it imported nothing)."""
    manifest = read_manifest(pact)
    if manifest is None:
        return None
    reused: list[str] = []
    rejected: list[str] = []
    waiting: list[str] = []
    for artifact in manifest.artifacts:
        key = item_key(artifact.component_id, artifact.phase)
        item = state.items.get(key)
        cache = item.cache if item is not None else ""
        (reused if cache == "hit" else rejected if cache == "dropped" else waiting).append(key)
    return ImportReport(
        pact_dir=manifest.pact_dir, reused=reused, rejected=rejected, waiting=waiting
    )


def import_json(state: RunState, project_dir: Path) -> dict[str, object] | None:
    """:func:`import_report` of the run in ``project_dir``, as JSON (None: no import)."""
    report = import_report(state, project_dir / ".pact")
    return report.to_json() if report is not None else None
