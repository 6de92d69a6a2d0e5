"""Building run directories event by event, for tests of resume, rebuild and status."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pact_workers.models import DecompositionTree, ErrorClass, Phase, Usage
from pact_workers.models.tree import tree_from_data
from scheduler.audit import AuditLog
from scheduler.events import (
    ArtifactsPromoted,
    Event,
    ItemDispatched,
    ItemFailed,
    ItemsPoisoned,
    ItemSucceeded,
    RunFailed,
    RunPaused,
)
from scheduler.launch import start_run
from scheduler.project import ProjectDir
from scheduler.settings import Settings


def star_tree(leaves: int, root: str = "root") -> DecompositionTree:
    """A root with ``leaves`` independent leaves ``c1..cN``."""
    ids = [f"c{i}" for i in range(1, leaves + 1)]
    nodes: dict[str, Any] = {root: {"component_id": root, "name": root, "children": ids}}
    for cid in ids:
        nodes[cid] = {"component_id": cid, "name": cid, "parent_id": root}
    return tree_from_data({"root_id": root, "nodes": nodes}, "<test>")


def files_for(cid: str, phase: Phase) -> dict[str, bytes]:
    if phase is Phase.CONTRACT:
        doc = {"component_id": cid, "name": cid, "description": f"{cid} contract"}
        return {"interface.json": json.dumps(doc).encode()}
    if phase is Phase.TEST:
        return {"tests/contract_test.py": f"def test_{cid}():\n    assert True\n".encode()}
    return {f"src/{cid}.py": f"NAME = {cid!r}\n".encode()}


class RunBuilder:
    """Writes a run's audit log and project files as a real run would."""

    def __init__(self, root: Path, tree: DecompositionTree) -> None:
        self.project = ProjectDir(root)
        start_run(self.project, tree, tree_bytes=b"{}", settings=Settings())
        self.store = self.project.store()
        self.audit = AuditLog(self.project.audit_path).open()

    def log(self, event: Event) -> Event:
        return self.audit.append(event)

    def succeed(self, cid: str, phase: Phase, *, cost_usd: float = 0.01) -> None:
        files = files_for(cid, phase)
        digest = self.store.put_bundle(files)
        self.log(ItemDispatched(component_id=cid, phase=phase, attempt=1, role="r"))
        self.log(
            ItemSucceeded(
                component_id=cid,
                phase=phase,
                attempt=1,
                output=digest,
                files=sorted(files),
                usage=Usage(input_tokens=100, output_tokens=50, cost_usd=cost_usd),
            )
        )
        paths = self.project.promote(cid, phase, files)
        self.log(ArtifactsPromoted(component_id=cid, phase=phase, paths=paths))

    def complete(self, cid: str, final: Phase = Phase.IMPLEMENT) -> None:
        for phase in (Phase.CONTRACT, Phase.TEST, final):
            self.succeed(cid, phase)

    def fail(
        self,
        cid: str,
        phase: Phase,
        error: str = "boom",
        *,
        poisoned: list[tuple[str, Phase]] | None = None,
    ) -> None:
        self.log(ItemDispatched(component_id=cid, phase=phase, attempt=1, role="r"))
        self.log(
            ItemFailed(
                component_id=cid,
                phase=phase,
                attempt=1,
                error_class=ErrorClass.PERMANENT,
                error=error,
                decision="give_up",
            )
        )
        if poisoned:
            self.log(ItemsPoisoned(root_component=cid, root_phase=phase, items=poisoned))

    def fail_run(self, reason: str) -> None:
        self.log(RunFailed(reason=reason))

    def pause(self, reason: str) -> None:
        self.log(RunPaused(reason=reason, recommendation="answer the question"))

    def close(self) -> ProjectDir:
        self.audit.close()
        return self.project


def counting_snapshot_reads(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The sizes of the state.json files parsed from here on (a spy on
    :func:`scheduler.snapshot.parse_state_json`, which it still calls)."""
    from scheduler import snapshot

    reads: list[int] = []
    parse = snapshot.parse_state_json

    def counted(raw: bytes) -> snapshot.Snapshot:
        reads.append(len(raw))
        return parse(raw)

    monkeypatch.setattr(snapshot, "parse_state_json", counted)
    return reads
