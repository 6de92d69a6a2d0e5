"""Provenance through the CLI as a user runs it (subprocesses): the sidecars ``pact demo``
leaves, drift in ``pact status`` and ``pact validate``, staleness, and rebuild
re-creating what went missing."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import yaml

from scheduler.project import ProjectDir
from scheduler.provenance import read_artifact_metadata
from scheduler.rebuild import disk_inconsistencies, rebuild_state
from tests.integration.test_anthropic_run import PRICES, Oracle
from tests.standins.anthropic_server import AnthropicStandIn


def pact(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "scheduler.cli", *args],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "COLUMNS": "400", "NO_COLOR": "1", **(env or {})},
    )


def sidecars(project: Path) -> dict[str, dict[str, object]]:
    return {
        p.relative_to(project).as_posix(): json.loads(p.read_text())
        for p in sorted((project / ".pact").rglob("*.meta.json"))
    }


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """One ``pact demo`` run for the module; tests that edit it work on a copy."""
    project = tmp_path_factory.mktemp("demo") / "project"
    done = pact("demo", str(project))
    assert done.returncode == 0, done.stderr
    yield project


@pytest.fixture
def demo_copy(demo: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "project"
    shutil.copytree(demo, copy, symlinks=True)
    (copy / ".pact" / "audit.lock").unlink(missing_ok=True)
    return copy


def test_metadata_written_alongside_artifact(demo: Path) -> None:
    found = sidecars(demo)
    status = json.loads(pact("status", str(demo), "--json").stdout)
    components = [row["component_id"] for row in status["components"]]
    assert len(components) == 10
    for cid in components:
        assert f".pact/contracts/{cid}/interface.meta.json" in found
        assert f".pact/contracts/{cid}/tests.meta.json" in found
        assert f".pact/implementations/{cid}/src.meta.json" in found
    assert len(found) == 30
    # Each file the run promoted is named by exactly one sidecar.
    covered = [f for meta in found.values() for f in meta["files"]]  # type: ignore[attr-defined]
    assert len(covered) == len(set(covered))
    assert all((demo / f).is_file() for f in covered)
    # What every item's attempts cost sums to the run's cost; the accepted attempts
    # alone cost less (one implementation was rejected once and retried).
    total = status["usage"]["cost_usd"]
    assert sum(m["item_cost_usd"] for m in found.values()) == pytest.approx(total)  # type: ignore[misc]
    assert sum(m["cost_usd"] for m in found.values()) < total  # type: ignore[misc]
    retried = found[".pact/implementations/evaluator/src.meta.json"]
    assert retried["attempt"] == 2 and retried["artifact_type"] == "implementation"
    assert {m["run_id"] for m in found.values()} == {status["run_id"]}
    assert all(m["worker"] and m["timestamp"] for m in found.values())
    assert found[".pact/implementations/calculator/src.meta.json"]["artifact_type"] == (
        "composition"
    )
    assert "*.meta.json" in (demo / ".pact" / ".gitignore").read_text().splitlines()


def test_editing_a_promoted_implementation_is_drift_in_status(demo_copy: Path) -> None:
    clean = json.loads(pact("status", str(demo_copy), "--json").stdout)
    assert clean["provenance"]["drift"] == []
    (demo_copy / ".pact/implementations/lexer/src/lexer.py").write_text("# by hand\n")
    status = pact("status", str(demo_copy), "--json")
    assert status.returncode == 0
    drift = json.loads(status.stdout)["provenance"]["drift"]
    assert [(d["component_id"], d["artifact"], d["severity"]) for d in drift] == [
        ("lexer", "implementation", "warning")
    ]
    human = pact("status", str(demo_copy)).stdout
    assert "drift warning: lexer: implementation changed" in human


def test_editing_a_contract_without_its_tests_is_an_error_in_validate(demo_copy: Path) -> None:
    assert pact("validate", str(demo_copy)).returncode == 0
    interface = demo_copy / ".pact/contracts/tokens/interface.json"
    doc = json.loads(interface.read_text())
    doc["description"] += " Tokens also carry their line number."
    interface.write_text(json.dumps(doc))
    human = pact("validate", str(demo_copy))
    assert human.returncode == 1
    assert "drift error: tokens: contract changed (hash mismatch) but its tests" in human.stdout
    machine = json.loads(pact("validate", str(demo_copy), "--json").stdout)
    assert [(d["component_id"], d["severity"]) for d in machine["drift"]] == [("tokens", "error")]


def test_staleness_in_status(demo_copy: Path) -> None:
    (demo_copy / "pact.yaml").write_text("staleness_window_days: 30\n")
    old = (datetime.now(UTC) - timedelta(days=45)).isoformat()
    for cid in ("tokens", "lexer"):
        path = demo_copy / ".pact" / "baselines" / f"{cid}.json"
        doc = json.loads(path.read_text())
        doc["captured_at"] = old
        path.write_text(json.dumps(doc))
    human = pact("status", str(demo_copy)).stdout
    assert "stale: tokens: verified 45 days ago, past the 30-day window" in human
    assert "stale: lexer: verified 45 days ago" in human
    report = json.loads(pact("status", str(demo_copy), "--json").stdout)["provenance"]
    assert {c["component_id"]: c["status"] for c in report["staleness"]} == {
        "tokens": "stale",
        "lexer": "stale",
    }
    assert report["staleness_window_days"] == 30 and report["fresh"] == 8


def test_a_dependency_verified_after_a_component_makes_it_aging(demo_copy: Path) -> None:
    path = demo_copy / ".pact" / "baselines" / "tokens.json"
    doc = json.loads(path.read_text())
    doc["captured_at"] = (datetime.now(UTC) + timedelta(minutes=5)).isoformat()
    path.write_text(json.dumps(doc))
    report = json.loads(pact("status", str(demo_copy), "--json").stdout)["provenance"]
    aging = {c["component_id"] for c in report["staleness"] if c["status"] == "aging"}
    assert "lexer" in aging and "tokens" not in aging


def test_rebuild_re_creates_lost_sidecars_and_baselines(demo_copy: Path) -> None:
    before = sidecars(demo_copy)
    baseline = demo_copy / ".pact/baselines/parser.json"
    kept = json.loads(baseline.read_text())
    for path in (demo_copy / ".pact").rglob("*.meta.json"):
        path.unlink()
    baseline.unlink()
    # An edit made while the baseline was gone must not become the baseline.
    (demo_copy / ".pact/implementations/parser/src/parser.py").write_text("# by hand\n")
    assert pact("rebuild", str(demo_copy)).returncode == 0
    assert sidecars(demo_copy) == before
    rebuilt = json.loads(baseline.read_text())
    assert rebuilt["impl_hash"] == kept["impl_hash"]
    drift = json.loads(pact("status", str(demo_copy), "--json").stdout)["provenance"]["drift"]
    assert [d["component_id"] for d in drift] == ["parser"]


def test_rebuild_dry_run_names_the_unreadable_sidecars_and_baselines_it_would_write(
    demo_copy: Path,
) -> None:
    """A dry run says what the rebuild would re-create, not that all matches."""
    sidecar = demo_copy / ".pact/contracts/lexer/interface.meta.json"
    baseline = demo_copy / ".pact/baselines/parser.json"
    sidecar.write_text("[")
    baseline.write_text("{")
    dry = pact("rebuild", str(demo_copy), "--dry-run")
    assert dry.returncode == 1, dry.stdout + dry.stderr
    said = " ".join((dry.stdout + dry.stderr).split())
    assert "lexer/contract: the provenance sidecar of .pact/contracts/lexer/interface.json" in said
    assert "parser: its provenance baseline parser.json is unreadable" in said
    assert sidecar.read_text() == "[" and baseline.read_text() == "{"
    assert pact("rebuild", str(demo_copy)).returncode == 0
    assert json.loads(sidecar.read_text())["component_id"] == "lexer"
    again = pact("rebuild", str(demo_copy), "--dry-run")
    assert again.returncode == 0 and "matches" in again.stdout


MODEL = "claude-standin"
DATED = "claude-standin-20260101"
CODER = "claude-standin-coder"
KEY = "sk-ant-standin-provenance-0123"


@pytest.fixture(scope="module")
def anthropic_project(example: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return anthropic_run(example, tmp_path_factory.mktemp("anthropic"))


def test_metadata_contains_model(anthropic_project: Path) -> None:
    """The model is what the provider says answered, per role as pact.yaml configures it."""
    project = anthropic_project
    for cid in ("tokens", "lexer", "calculator"):
        contract = read_artifact_metadata(project / f".pact/contracts/{cid}/interface.json")
        assert contract is not None and contract.model == DATED  # the alias, resolved
    code = read_artifact_metadata(project / ".pact/implementations/tokens/src")
    assert code is not None and code.model == CODER  # the code author's own model
    integrated = read_artifact_metadata(project / ".pact/implementations/calculator/src")
    assert integrated is not None and integrated.model == DATED


def test_metadata_contains_cost(anthropic_project: Path) -> None:
    project = anthropic_project
    status = json.loads(pact("status", str(project), "--json").stdout)
    found = sidecars(project)
    assert len(found) == 30
    for meta in found.values():
        assert meta["cost_input_tokens"] > 0 and meta["cost_output_tokens"] > 0  # type: ignore[operator]
        assert meta["cost_usd"] > 0  # type: ignore[operator]
    assert sum(m["cost_usd"] for m in found.values()) == pytest.approx(  # type: ignore[misc]
        status["usage"]["cost_usd"]
    )


def anthropic_run(example: Path, tmp_path: Path) -> Path:
    """The example run in process against the Messages API's stand-in, which answers
    the ``claude-standin`` alias as a dated model."""
    project = tmp_path / "project"
    project.mkdir()
    settings = {
        "agents": {
            "default": {"backend": "anthropic", "model": MODEL},
            "code_author": {"backend": "anthropic", "model": CODER},
        },
        "prices": {DATED: PRICES, CODER: PRICES, MODEL: PRICES},
    }
    with AnthropicStandIn(
        api_key=KEY, oracle=Oracle(example / "replay"), aliases={MODEL: DATED}
    ) as api:
        for role in settings["agents"].values():
            role["base_url"] = api.url
        (project / "pact.yaml").write_text(yaml.safe_dump(settings), encoding="utf-8")
        done = pact(
            "run",
            str(example / "tree.json"),
            "--project",
            str(project),
            "--agent",
            "anthropic",
            env={"ANTHROPIC_API_KEY": KEY},
        )
    assert done.returncode == 0, done.stderr
    return project


def test_an_edit_is_reported_once_as_drift_not_also_as_an_inconsistency(demo_copy: Path) -> None:
    (demo_copy / ".pact/implementations/lexer/src/lexer.py").write_text("# by hand\n")
    status = json.loads(pact("status", str(demo_copy), "--json").stdout)
    assert [d["component_id"] for d in status["provenance"]["drift"]] == ["lexer"]
    assert status["inconsistencies"] == []
    # The log's digest check (what rebuild compares) leaves baselined components to drift.
    project = ProjectDir(demo_copy)
    assert disk_inconsistencies(rebuild_state(demo_copy), project) == []
    # Without a baseline (a component not verified by passing tests) it still reports it.
    (demo_copy / ".pact" / "baselines" / "lexer.json").unlink()
    assert disk_inconsistencies(rebuild_state(demo_copy), project) == [
        "lexer/implement: .pact/implementations/lexer/src/lexer.py differs from the verified "
        "implementation"
    ]


def test_status_looks_at_the_files_of_an_untouched_component_once(
    demo_copy: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The drift check's stat signature already shows an untouched component's verified
    files are all there: the check for missing files skips it, and still finds a file
    deleted from a touched one (reported as both drift and a missing file)."""
    from scheduler.commands.statusdoc import gather_status

    checked: list[str] = []
    real_isfile = os.path.isfile

    def isfile(path: str) -> bool:
        checked.append(str(path))
        return real_isfile(path)

    with monkeypatch.context() as m:
        m.setattr(os.path, "isfile", isfile)
        _, _, problems, provenance = gather_status(demo_copy)
    assert problems == [] and provenance.drift == []
    implementations = str(demo_copy / ".pact" / "implementations")
    assert not [p for p in checked if p.startswith(implementations)]

    (demo_copy / ".pact/implementations/lexer/src/lexer.py").unlink()
    _, _, problems, provenance = gather_status(demo_copy)
    assert [(d.component_id, d.severity) for d in provenance.drift] == [("lexer", "error")]
    assert problems == [
        "lexer/implement: marked done but its implementation "
        ".pact/implementations/lexer/src/lexer.py is missing on disk"
    ]
