"""``pact validate``, and validation as ``pact run`` and ``pact status`` show it: the CLI
as a user runs it, in subprocesses."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

from tests.conftest import shared_data


def pact(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "400", "NO_COLOR": "1"}
    return subprocess.run(
        [sys.executable, "-m", "scheduler.cli", *args],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )


def files_of(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}


#: What the published stigmergy contracts really get wrong (see the README's section).
STIGMERGY_ERRORS = {
    ("business_weight_computation", "dependencies[0]", "'identity_resolver' exists nowhere"),
    ("inquiry_engine", "functions[4].inputs[1].type_ref", "'OptionalLLMDimensionExtraction'"),
    ("merge_lifecycle_integration", "functions[4].inputs[1].type_ref", "'ContextSnapshotList'"),
    ("merge_lifecycle_integration", "functions[12].inputs[0].type_ref", "'ContextSnapshotList'"),
    ("merge_lifecycle_integration", "functions[12].output_type", "'MergeProposalList'"),
    ("temporal_adapter_integration", "functions[5].inputs[0].type_ref", "'SignalSourceList'"),
    ("temporal_adapter_integration", "functions[5].output_type", "'AggregatedFetchResult'"),
    ("identity_prompting", "functions[3].output_type", "'PresenterFactoryResult'"),
    ("identity_prompting", "functions[4].output_type", "'OrchestratorWithConfig'"),
}


def test_pact_validate_reports_every_finding_of_the_26_stigmergy_contracts(
    tmp_path: Path,
) -> None:
    data = tmp_path / "stigmergy"
    shutil.copytree(shared_data("stigmergy"), data)
    before = files_of(data)
    human = pact("validate", str(data / "contracts"))
    assert human.returncode == 1, human.stderr
    lines = human.stdout.splitlines()
    for cid, path, words in STIGMERGY_ERRORS:
        assert any(
            line.startswith(f"error: {cid}: {path}: ") and words in line for line in lines
        ), (cid, path)
    assert (
        "warning: embedding_strategy_protocol: description: vague phrase 'as needed'"
        in human.stdout
    )
    assert "26 contracts: 9 errors, 267 warnings (contract_quality: warn)" in human.stdout

    doc = json.loads(
        pact(
            "validate",
            str(data / "contracts"),
            "--tree",
            str(data / "decomposition" / "tree.json"),
            "--json",
        ).stdout
    )
    assert (doc["contracts"], doc["errors"], doc["warnings"]) == (26, 9, 267)
    errors = {(f["component_id"], f["path"]) for f in doc["findings"] if f["severity"] == "error"}
    assert errors == {(cid, path) for cid, path, _ in STIGMERGY_ERRORS}
    rules = {f["rule"] for f in doc["findings"] if f["severity"] == "warning"}
    assert rules == {"specificity", "side_effects"}  # no locality or name findings there

    blocked = pact("validate", str(data / "contracts"), "--contract-quality", "block", "--json")
    assert blocked.returncode == 1
    assert (json.loads(blocked.stdout)["errors"], json.loads(blocked.stdout)["warnings"]) == (
        9 + 267,
        0,
    )
    assert files_of(data) == before  # validation writes nothing


def test_pact_validate_passes_contracts_with_warnings_only(example: Path) -> None:
    res = pact("validate", str(example / "replay"), "--tree", str(example / "tree.json"))
    assert res.returncode == 0, res.stdout + res.stderr
    assert "10 contracts: 0 errors, 2 warnings" in res.stdout
    assert "warning: parser: dependencies[0]: depends on 'tokens', a distant cousin" in res.stdout


def run_project(tmp_path: Path, example: Path, **settings: object) -> tuple[Path, Path]:
    replay = tmp_path / "replay"
    shutil.copytree(example / "replay", replay)
    env = replay / "environment" / "interface.json"
    doc = json.loads(env.read_text())
    doc["dependencies"] = ["nodes_AST"]
    env.write_text(json.dumps(doc))
    tokens = replay / "tokens" / "interface.json"
    doc = json.loads(tokens.read_text())
    doc["functions"][0]["description"] = "Handles the entire class of errors a token can have."
    tokens.write_text(json.dumps(doc))
    project = tmp_path / "project"
    project.mkdir()
    (project / "pact.yaml").write_text(yaml.safe_dump({"backoff_base_s": 0.05, **settings}))
    return project, replay


def test_a_run_shows_corrections_and_findings_in_status_and_validate_agrees(
    tmp_path: Path, example: Path
) -> None:
    project, replay = run_project(tmp_path, example)
    ran = pact(
        "run", str(example / "tree.json"), "--project", str(project), "--replay-dir", str(replay)
    )
    assert ran.returncode == 0, ran.stdout + ran.stderr

    status = pact("status", str(project))
    assert status.returncode == 0
    out = " ".join(status.stdout.split())
    assert (
        "name corrected: environment: dependencies[0]: 'nodes_AST' read as 'ast_nodes' "
        "(transposition)" in out
    )
    assert (
        "warning: environment (contract attempt 1): dependencies[0]: depends on 'ast_nodes'" in out
    )
    assert (
        "warning: tokens (contract attempt 1): functions[0].description: vague phrase "
        "'entire class of'" in out
    )
    doc = json.loads(pact("status", str(project), "--json").stdout)
    assert doc["validation"]["environment"]["corrections"][0]["component_id"] == "ast_nodes"

    valid = pact("validate", str(project), "--json")
    assert valid.returncode == 0, valid.stdout + valid.stderr
    found = json.loads(valid.stdout)
    shown = {
        (cid, f["path"], f["message"])
        for cid, check in doc["validation"].items()
        for f in check["findings"]
    }
    assert {(f["component_id"], f["path"], f["message"]) for f in found["findings"]} == shown

    # A contract edited by hand after the run is checked again, not taken from the log.
    contract = project / ".pact" / "contracts" / "lexer" / "interface.json"
    edited = json.loads(contract.read_text())
    edited["functions"][0]["output_type"] = "list[Lexeme]"
    contract.write_text(json.dumps(edited))
    again = pact("validate", str(project))
    assert again.returncode == 1
    assert "error: lexer: functions[0].output_type: type 'Lexeme' is not defined" in again.stdout
    contract.write_text("{not json")
    broken = pact("validate", str(project))
    assert broken.returncode == 2 and "lexer/interface.json: invalid JSON" in broken.stderr


def test_contract_quality_block_in_pact_yaml_rejects_the_vague_contract(
    tmp_path: Path, example: Path
) -> None:
    project, replay = run_project(tmp_path, example, contract_quality="block")
    ran = pact(
        "run", str(example / "tree.json"), "--project", str(project), "--replay-dir", str(replay)
    )
    assert ran.returncode == 1, ran.stdout + ran.stderr
    status = pact("status", str(project))
    out = " ".join(status.stdout.split())
    assert (
        "error: tokens (contract attempt 3): functions[0].description: vague phrase "
        "'entire class of'" in out
    )
    doc = json.loads(pact("status", str(project), "--json").stdout)
    row = next(r for r in doc["components"] if r["component_id"] == "tokens")
    assert row["phases"]["contract"] == "failed"
