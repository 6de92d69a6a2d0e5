"""Contract validation and quality wired into real runs: local executor, local sandbox,
the replay agent serving edited copies of the example's contracts.

Each test changes what a run does: which items wait, which attempts are rejected and
with what feedback, which fail, and what the harness measures.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from pact_workers.agents.replay import ReplayAgent
from pact_workers.models import ItemStatus, Phase
from pact_workers.models.tree import load_tree
from pact_workers.sandbox import LocalSandbox
from scheduler.audit import read_events
from scheduler.commands import drive_run, validate_path
from scheduler.events import ContractChecked, Event, ItemDispatched, ItemFailed, ItemSucceeded
from scheduler.launch import start_run
from scheduler.project import ProjectDir
from scheduler.settings import Settings
from scheduler.state import RunState, RunStatus
from scheduler.validation import DependencyKind, Rule, Severity

FAST = {"backoff_base_s": 0.05, "backoff_cap_s": 0.2}
#: Everything under these two features depends on nothing under evaluation.
INDEPENDENT = ["tokens", "lexer", "ast_nodes", "parser", "lexing", "parsing"]


def edit_contract(replay: Path, cid: str, change: Any) -> None:
    path = replay / cid / "interface.json"
    doc = json.loads(path.read_text())
    change(doc)
    path.write_text(json.dumps(doc, indent=2))


def set_script(replay: Path, steps: dict[str, Any]) -> None:
    doc = yaml.safe_load((replay / "replay.yaml").read_text())
    doc["script"] = steps
    (replay / "replay.yaml").write_text(yaml.safe_dump(doc))


def run(example: Path, replay: Path, root: Path, **settings: Any) -> tuple[RunState, ProjectDir]:
    project = ProjectDir(root)
    conf = Settings.model_validate({**FAST, **settings})
    tree = example / "tree.json"
    start_run(project, load_tree(tree), tree_bytes=tree.read_bytes(), settings=conf)
    state = drive_run(
        project=project,
        settings=conf,
        agent=ReplayAgent(replay),
        sandbox=LocalSandbox(),
        workers=4,
    )
    return state, project


def events_of(project: ProjectDir) -> list[Event]:
    events, warnings = read_events(project.audit_path)
    assert warnings == []
    return events


def seq(events: list[Event], kind: type, cid: str, phase: Phase, attempt: int | None = None) -> int:
    return next(
        e.seq
        for e in events
        if isinstance(e, kind)
        and (e.component_id, e.phase) == (cid, phase)
        and (attempt is None or e.attempt == attempt)
    )


def test_a_transposed_dependency_name_is_read_as_the_real_component_and_its_implementation_waits(
    example: Path, replay_copy: Path, tmp_path: Path
) -> None:
    # environment (under evaluation) names ast_nodes (under parsing), words swapped and
    # in capitals; nothing in the tree makes environment wait for ast_nodes.
    edit_contract(replay_copy, "environment", lambda d: d.update(dependencies=["nodes_AST"]))
    # ast_nodes' implementation is slow, so environment's would finish first if it did not wait.
    set_script(replay_copy, {"ast_nodes": {"implement": {1: {"latency_s": 1.0}}}})
    state, project = run(example, replay_copy, tmp_path / "p")
    assert state.status is RunStatus.COMPLETED
    assert "ast_nodes" in state.dependencies["environment"]
    events = events_of(project)
    accepted = [
        e for e in events if isinstance(e, ItemSucceeded) and e.component_id == "environment"
    ]
    assert accepted[0].discovered_dependencies == ["ast_nodes"]
    assert seq(events, ItemSucceeded, "ast_nodes", Phase.IMPLEMENT) < seq(
        events, ItemDispatched, "environment", Phase.IMPLEMENT
    )
    check = state.validation["environment"]
    (correction,) = check.corrections
    assert (correction.written, correction.component_id) == ("nodes_AST", "ast_nodes")
    assert correction.rule == "transposition"
    # The edge reaches from one feature into another: a locality warning, no error.
    (locality,) = [f for f in check.findings if f.rule is Rule.LOCALITY]
    assert locality.severity is Severity.WARNING and "distant cousin" in locality.message


def test_an_external_dependency_that_exists_nowhere_fails_its_component_after_feedback(
    example: Path, replay_copy: Path, tmp_path: Path
) -> None:
    edit_contract(
        replay_copy,
        "environment",
        lambda d: d.update(external_dependencies=["json", "calc_units_nowhere"]),
    )
    state, project = run(example, replay_copy, tmp_path / "p")
    assert state.status is RunStatus.FAILED
    item = state.item("environment", Phase.CONTRACT)
    assert item.status is ItemStatus.FAILED and item.attempt == 3
    assert "'calc_units_nowhere' exists nowhere" in item.last_error
    assert "'json'" not in item.last_error  # importable where it was verified
    events = events_of(project)
    failures = [
        e
        for e in events
        if isinstance(e, ItemFailed) and (e.component_id, e.phase) == ("environment", "contract")
    ]
    assert [f.decision for f in failures] == ["retry", "retry", "give_up"]
    assert all("calc_units_nowhere" in f.error for f in failures)
    retries = [
        e
        for e in events
        if isinstance(e, ItemDispatched)
        and (e.component_id, e.phase) == ("environment", "contract")
        and e.attempt > 1
    ]
    assert [len(r.feedback) for r in retries] == [1, 2]
    assert all("calc_units_nowhere" in note.summary for r in retries for note in r.feedback)
    checked = [
        e for e in events if isinstance(e, ContractChecked) and e.component_id == "environment"
    ]
    kinds = {d.component_id: (d.kind, d.importable) for d in checked[-1].dependencies}
    assert kinds == {
        "json": (DependencyKind.EXTERNAL, True),
        "calc_units_nowhere": (DependencyKind.EXTERNAL, False),
    }
    # Its dependents are poisoned; everything independent of it completed.
    assert state.item("evaluator", Phase.IMPLEMENT).status is ItemStatus.POISONED
    assert state.item("calculator", Phase.INTEGRATE).status is ItemStatus.POISONED
    for cid in INDEPENDENT:
        final = Phase.IMPLEMENT if state.tree and state.tree.nodes[cid].is_leaf else Phase.INTEGRATE
        assert state.item(cid, final).status is ItemStatus.DONE, cid


def test_an_external_dependency_in_the_project_source_tree_is_accepted(
    example: Path, replay_copy: Path, tmp_path: Path
) -> None:
    root = tmp_path / "p"
    (root / "vendor" / "units").mkdir(parents=True)
    (root / "vendor" / "units" / "__init__.py").write_text("SCALE = 1\n")
    edit_contract(replay_copy, "environment", lambda d: d.update(dependencies=["vendor.units"]))
    state, _ = run(example, replay_copy, root)
    assert state.status is RunStatus.COMPLETED
    assert state.external_dependencies["environment"] == ["vendor.units"]


def test_a_bad_type_reference_rejects_the_contract_before_anything_is_dispatched_against_it(
    example: Path, replay_copy: Path, tmp_path: Path
) -> None:
    broken = replay_copy / "evaluator-bad"
    broken.mkdir()
    doc = json.loads((replay_copy / "evaluator" / "interface.json").read_text())
    doc["functions"][0]["output_type"] = "EvaluationOutcome"
    (broken / "interface.json").write_text(json.dumps(doc))
    set_script(replay_copy, {"evaluator": {"contract": {1: {"files": "evaluator-bad"}}}})
    state, project = run(example, replay_copy, tmp_path / "p")
    assert state.status is RunStatus.COMPLETED
    events = events_of(project)
    rejected = seq(events, ItemFailed, "evaluator", Phase.CONTRACT, 1)
    failure = next(e for e in events if e.seq == rejected)
    assert isinstance(failure, ItemFailed) and failure.decision == "retry"
    assert "functions[0].output_type: type 'EvaluationOutcome' is not defined" in failure.error
    accepted = seq(events, ItemSucceeded, "evaluator", Phase.CONTRACT)
    # Nothing that needs evaluator's contract started before it was accepted.
    for cid, phase in [("evaluator", Phase.TEST), ("evaluation", Phase.CONTRACT)]:
        assert seq(events, ItemDispatched, cid, phase) > accepted > rejected


def test_a_dependency_whose_contract_is_not_written_yet_makes_the_next_attempt_wait_for_it(
    example: Path, replay_copy: Path, tmp_path: Path
) -> None:
    edit_contract(replay_copy, "environment", lambda d: d.update(dependencies=["tokens"]))
    set_script(replay_copy, {"tokens": {"contract": {1: {"latency_s": 1.0}}}})
    state, project = run(example, replay_copy, tmp_path / "p")
    assert state.status is RunStatus.COMPLETED
    events = events_of(project)
    first = next(
        e
        for e in events
        if isinstance(e, ItemFailed) and (e.component_id, e.phase) == ("environment", "contract")
    )
    assert "'tokens', which has no contract yet" in first.error
    assert "waits for the contracts of tokens" in first.error
    assert seq(events, ItemDispatched, "environment", Phase.CONTRACT, 2) > seq(
        events, ItemSucceeded, "tokens", Phase.CONTRACT
    )


def vague_tokens(doc: dict[str, Any]) -> None:
    doc["functions"][0]["description"] = "Handles the entire class of errors a token can have."
    doc["functions"][1]["structured_side_effects"] = []


def test_contract_quality_block_rejects_a_vague_contract_naming_the_field(
    example: Path, replay_copy: Path, tmp_path: Path
) -> None:
    fixed = replay_copy / "tokens-fixed"
    fixed.mkdir()
    (fixed / "interface.json").write_bytes((replay_copy / "tokens" / "interface.json").read_bytes())
    edit_contract(replay_copy, "tokens", vague_tokens)
    set_script(replay_copy, {"tokens": {"contract": {2: {"files": "tokens-fixed"}}}})
    state, project = run(example, replay_copy, tmp_path / "p", contract_quality="block")
    assert state.status is RunStatus.COMPLETED
    events = events_of(project)
    failure = next(
        e
        for e in events
        if isinstance(e, ItemFailed) and (e.component_id, e.phase) == ("tokens", "contract")
    )
    assert "functions[0].description: vague phrase 'entire class of'" in failure.error
    assert "functions[1].side_effects: 'symbol_kind' declares no side effects" in failure.error
    retry = next(
        e
        for e in events
        if isinstance(e, ItemDispatched)
        and (e.component_id, e.phase, e.attempt) == ("tokens", "contract", 2)
    )
    assert "functions[0].description" in retry.feedback[0].summary
    assert "tokens" not in state.validation  # the accepted attempt found nothing


def test_contract_quality_warn_records_the_findings_and_the_run_completes(
    example: Path, replay_copy: Path, tmp_path: Path
) -> None:
    edit_contract(replay_copy, "tokens", vague_tokens)
    state, project = run(example, replay_copy, tmp_path / "p")
    assert state.status is RunStatus.COMPLETED
    assert state.item("tokens", Phase.CONTRACT).attempt == 1
    check = state.validation["tokens"]
    assert check.accepted
    assert {(f.path, f.severity) for f in check.findings} == {
        ("functions[0].description", Severity.WARNING),
        ("functions[1].side_effects", Severity.WARNING),
    }
    # The batch validation after the run is a lookup in the run's cache that finds the
    # same (besides tokens': the example's own cross-feature edges, as warnings).
    after = validate_path(path=project.root)
    assert after.cache_hits == len(after.report.checks) == 10
    recorded = {(cid, f.path, f.message) for cid, c in state.validation.items() for f in c.findings}
    assert {(f.component_id, f.path, f.message) for f in after.report.findings} == recorded
    assert {cid for cid, _, _ in recorded} == {"tokens", "evaluator", "parser"}
    assert after.report.errors == []


def budget_tokens(ms: int) -> Any:
    def change(doc: dict[str, Any]) -> None:
        doc["functions"][1]["performance_budget"] = {"p95_latency_ms": ms, "complexity": "O(1)"}

    return change


def slow_symbol_kind(replay: Path) -> None:
    src = replay / "tokens" / "src" / "tokens.py"
    text = src.read_text()
    anchor = "    if len(char) != 1:\n"
    text = text.replace(anchor, "    import time\n\n    time.sleep(0.02)\n" + anchor, 1)
    assert "time.sleep(0.02)" in text
    src.write_text(text)


def test_a_function_over_its_latency_budget_fails_verification_naming_budget_and_p95(
    example: Path, replay_copy: Path, tmp_path: Path
) -> None:
    edit_contract(replay_copy, "tokens", budget_tokens(5))
    slow_symbol_kind(replay_copy)
    set_script(replay_copy, {})
    state, _ = run(example, replay_copy, tmp_path / "p", max_attempts=1)
    item = state.item("tokens", Phase.IMPLEMENT)
    assert item.status is ItemStatus.FAILED
    assert item.test_results is not None
    (failure,) = item.test_results.failure_details
    assert "test_symbol_kind_p95_latency_within_5_ms" in failure.test_id
    assert "p95 latency of tokens.symbol_kind is 2" in failure.error_message
    assert "over its budget of 5 ms" in failure.error_message


def test_a_function_within_its_latency_budget_passes(
    example: Path, replay_copy: Path, tmp_path: Path
) -> None:
    edit_contract(replay_copy, "tokens", budget_tokens(50))
    set_script(replay_copy, {})
    state, _ = run(example, replay_copy, tmp_path / "p")
    assert state.status is RunStatus.COMPLETED
    results = state.item("tokens", Phase.IMPLEMENT).test_results
    assert results is not None and results.all_passed
    own = (example / "replay" / "tokens" / "tests" / "contract_test.py").read_text()
    assert results.total == own.count("\ndef test_") + 1  # the harness's budget test
