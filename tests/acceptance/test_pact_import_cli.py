"""``pact import``: a run that re-uses what a Pact project produced and authors the rest."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from pact_workers.models.work import Phase
from scheduler.audit import read_events
from scheduler.events import CacheHit, ItemDispatched, ItemSucceeded
from scheduler.interview.recorded import InterviewRecorded
from scheduler.rebuild import rebuild_state
from tests.conftest import shared_data
from tests.pactlayout import FAILING, files_of, pact_project_from_example


def pact(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "400", "NO_COLOR": "1"}
    return subprocess.run(
        [sys.executable, "-m", "scheduler.cli", *args],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )


def events_of(project: Path) -> list[object]:
    events, _ = read_events(project / ".pact" / "audit.jsonl")
    return list(events)


def test_importing_stigmergy_reuses_all_26_contracts_and_authors_only_what_is_missing(
    tmp_path: Path,
) -> None:
    source = shared_data("stigmergy")
    pact_root = tmp_path / "stigmergy"
    (pact_root / ".pact").mkdir(parents=True)
    for part in ("decomposition", "contracts"):
        shutil.copytree(source / part, pact_root / ".pact" / part)
    before = files_of(pact_root)
    project = tmp_path / "run"
    res = pact("import", str(pact_root), "--project", str(project), "--agent", "noop")
    assert res.returncode == 0, res.stdout + res.stderr
    # Every validation finding of the imported contracts was shown, naming its file.
    assert "contracts/identity_prompting/history/20260214_210206.json" in res.stdout
    events = events_of(project)
    hits = {(e.component_id, e.phase) for e in events if isinstance(e, CacheHit)}
    imported = {
        p.name for p in (source / "contracts").iterdir() if p.is_dir() and any(p.rglob("*.json"))
    }
    assert len(imported) == 26
    assert hits == {(cid, Phase.CONTRACT) for cid in imported}
    origins = {e.source_run for e in events if isinstance(e, CacheHit)}
    assert origins == {f"pact-import:{(pact_root / '.pact').resolve()}"}
    # The agent was asked for one contract only: the component Pact wrote none for.
    asked = {
        e.component_id
        for e in events
        if isinstance(e, ItemDispatched) and e.phase is Phase.CONTRACT and e.cached is None
    }
    assert len(asked) == 1 and asked.isdisjoint(imported)
    re_used = [
        e
        for e in events
        if isinstance(e, ItemSucceeded) and e.phase is Phase.CONTRACT and e.component_id in imported
    ]
    assert len(re_used) == 26 and all(e.usage.cost_usd == 0 for e in re_used)
    # Tests and implementations, which the Pact project lacks, were authored.
    authored = {
        (e.component_id, e.phase)
        for e in events
        if isinstance(e, ItemDispatched) and e.phase is not Phase.CONTRACT
    }
    assert len(authored) == 27 * 2
    # Pact's interview became the run's.
    (interview,) = [e for e in events if isinstance(e, InterviewRecorded)]
    assert interview.questions == 11
    assert files_of(pact_root) == before  # the Pact project was never written


def test_importing_a_pact_layout_reverifies_its_artifacts_and_reauthors_the_failing_one(
    example: Path, tmp_path: Path
) -> None:
    pact_root = pact_project_from_example(example, tmp_path / "pact-project")
    before = files_of(pact_root)
    project = tmp_path / "run"
    res = pact(
        "import",
        str(pact_root / ".pact"),
        "--project",
        str(project),
        "--replay-dir",
        str(example / "replay"),
    )
    assert res.returncode == 0, res.stdout + res.stderr
    events = events_of(project)
    hits = {(e.component_id, e.phase) for e in events if isinstance(e, CacheHit)}
    # The harness rejected Pact's evaluator (11/13): the agent was asked instead.
    state = rebuild_state(project)
    dropped = {key for key, item in state.items.items() if item.cache == "dropped"}
    assert dropped == {f"{FAILING}/implement"}
    assert len(hits) == 29 and (FAILING, Phase.IMPLEMENT) not in hits
    paid = {
        (e.component_id, e.phase)
        for e in events
        if isinstance(e, ItemSucceeded) and e.usage.cost_usd > 0
    }
    assert paid == {(FAILING, Phase.IMPLEMENT)}
    # Integrating the corrected evaluator, the parents' Pact code now passes as it is.
    assert ("evaluation", Phase.INTEGRATE) in hits and ("calculator", Phase.INTEGRATE) in hits
    promoted = project / ".pact" / "implementations" / FAILING / "src" / "evaluator.py"
    served = example / "replay" / FAILING / "src" / "evaluator.py"
    assert promoted.read_bytes() == served.read_bytes()
    # pact status says where the re-used artifacts came from, and what was authored again.
    res = pact("status", str(project), "--json")
    imported = json.loads(res.stdout)["imported"]
    assert imported["from"] == str((pact_root / ".pact").resolve())
    assert len(imported["reused"]) == 29 and imported["rejected"] == [f"{FAILING}/implement"]
    res = pact("status", str(project))
    assert "imported: 29 of 30 artifacts" in res.stdout
    assert files_of(pact_root) == before


def test_pact_import_refuses_bad_input_and_writes_nothing(example: Path, tmp_path: Path) -> None:
    res = pact("import", str(tmp_path / "nowhere"), "--project", str(tmp_path / "run"))
    assert res.returncode == 2 and "nowhere" in res.stderr
    pact_root = pact_project_from_example(example, tmp_path / "pact-project")
    res = pact("import", str(pact_root), "--project", str(pact_root))
    assert res.returncode == 2 and "never writes into it" in res.stderr
    contract = pact_root / ".pact" / "contracts" / "lexer" / "interface.json"
    contract.write_text('{"component_id": "lexer", "functions": 3}')
    res = pact("import", str(pact_root), "--project", str(tmp_path / "run"))
    assert res.returncode == 2, res.stdout + res.stderr
    assert "contracts/lexer/interface.json" in res.stderr and "Traceback" not in res.stderr
    assert not (tmp_path / "run").exists()


def test_pact_run_from_pact_imports_like_pact_import(example: Path, tmp_path: Path) -> None:
    pact_root = pact_project_from_example(example, tmp_path / "pact-project")
    before = files_of(pact_root)
    project = tmp_path / "run"
    res = pact(
        "run",
        "--from-pact",
        str(pact_root),
        "--project",
        str(project),
        "--replay-dir",
        str(example / "replay"),
    )
    assert res.returncode == 0, res.stdout + res.stderr
    assert "importing 30 artifacts of 10 components" in res.stderr
    hits = {(e.component_id, e.phase) for e in events_of(project) if isinstance(e, CacheHit)}
    assert len(hits) == 29 and (FAILING, Phase.IMPLEMENT) not in hits
    imported = json.loads(pact("status", str(project), "--json").stdout)["imported"]
    assert imported["from"] == str((pact_root / ".pact").resolve())
    assert imported["rejected"] == [f"{FAILING}/implement"]
    assert files_of(pact_root) == before


def test_pact_run_takes_a_tree_or_from_pact_not_both(example: Path, tmp_path: Path) -> None:
    pact_root = pact_project_from_example(example, tmp_path / "pact-project")
    project = tmp_path / "run"
    tree = str(example / "tree.json")
    res = pact("run", tree, "--from-pact", str(pact_root), "--project", str(project))
    assert res.returncode == 2, res.stdout + res.stderr
    assert "not both" in res.stderr and "--from-pact" in res.stderr
    res = pact("run", "--project", str(project))
    assert res.returncode == 2 and "give TREE" in res.stderr
    res = pact("run", "--from-pact", str(pact_root), "--project", str(project), "--dry-run")
    assert res.returncode == 2 and "--dry-run" in res.stderr
    res = pact("run", "--from-pact", str(tmp_path / "nowhere"), "--project", str(project))
    assert res.returncode == 2 and "nowhere" in res.stderr and "Traceback" not in res.stderr
    assert not project.exists()
