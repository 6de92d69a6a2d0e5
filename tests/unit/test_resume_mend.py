"""`pact resume` over verified outputs whose blobs went missing or corrupt on disk: they
are written again from the promoted copies that hash to them, or the resume is refused
before anything is written (scheduler.repair)."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from pact_workers.artifacts import digest_bytes
from scheduler.cli import app
from scheduler.rebuild import rebuild_state
from scheduler.state import RunStatus
from tests.unit.test_resume import failed_at_implement


def _flip_every_blob(artifacts: Path) -> int:
    flipped = 0
    for path in artifacts.rglob("*"):
        if path.is_file():
            data = bytearray(path.read_bytes())
            data[0] ^= 0x01  # same size: a store checking sizes alone keeps it
            path.write_bytes(bytes(data))
            flipped += 1
    return flipped


def _intact(artifacts: Path) -> bool:
    return all(
        digest_bytes(p.read_bytes()) == f"sha256:{p.name}"
        for p in artifacts.rglob("*")
        if p.is_file()
    )


def test_a_resume_mends_corrupt_verified_outputs_from_their_promoted_copies(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Every blob flipped: the resume writes the done items' outputs again from the
    project's promoted files, the work builds its inputs over the corrupt copies (a
    store of the same bytes writes them again), and the run completes."""
    project = failed_at_implement(tmp_path).close()
    assert _flip_every_blob(project.artifacts_dir) > 10
    res = CliRunner().invoke(app, ["resume", str(project.root), "--agent", "noop"])
    assert res.exit_code == 0, res.output
    assert "written again from the promoted copies" in caplog.text
    assert rebuild_state(project.root).status is RunStatus.COMPLETED
    for cid in ("c1", "c2", "c3", "c4"):  # done before, and read as inputs since
        assert (project.contracts_dir / cid / "interface.json").is_file()
    assert _intact(project.artifacts_dir)


def test_a_resume_refuses_a_corrupt_output_whose_promoted_copy_differs_and_writes_nothing(
    tmp_path: Path,
) -> None:
    project = failed_at_implement(tmp_path).close()
    _flip_every_blob(project.artifacts_dir)
    interface = project.contracts_dir / "c2" / "interface.json"
    interface.write_bytes(interface.read_bytes() + b"\n")  # edited since it was verified
    before = {p: p.read_bytes() for p in project.root.rglob("*") if p.is_file()}
    res = CliRunner().invoke(app, ["resume", str(project.root), "--agent", "noop"])
    assert res.exit_code == 2, res.output
    message = " ".join(res.output.split())
    assert "c2/contract" in message and "contracts/c2/interface.json" in message
    assert "Nothing was written" in message and "backup" in message
    after = {p: p.read_bytes() for p in project.root.rglob("*") if p.is_file()}
    assert after == before
    assert rebuild_state(project.root).status is RunStatus.FAILED
