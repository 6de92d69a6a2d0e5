"""The gates in real runs of the bundled example: local executor, local sandbox (real
contract tests in subprocesses) and the replay agent, whose calls are recorded."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from pact_workers.agents.replay import ReplayAgent
from pact_workers.models import ItemStatus, Phase
from pact_workers.models.tree import load_tree
from pact_workers.models.work import Role
from pact_workers.sandbox import LocalSandbox
from scheduler.audit import read_events
from scheduler.commands import drive_run
from scheduler.events import ItemDispatched, ItemFailed, ItemSucceeded, RunPaused
from scheduler.gates.events import (
    AuditRequested,
    AuditReviewed,
    GateWouldHaveBlocked,
    ReviewRequested,
    TeachbackReviewed,
    TeachbackSubmitted,
)
from scheduler.launch import start_run
from scheduler.project import ProjectDir
from scheduler.settings import Settings
from scheduler.state import RunState, RunStatus

FAST = {"backoff_base_s": 0.05, "backoff_cap_s": 0.2}
GATED = ("ast_nodes", Phase.IMPLEMENT)


def run(
    example: Path, replay: Path, project_dir: Path, **settings: object
) -> tuple[RunState, ReplayAgent, ProjectDir]:
    tree_path = example / "tree.json"
    project = ProjectDir(project_dir)
    conf = Settings.model_validate({**FAST, **settings})
    agent = ReplayAgent(replay)
    start_run(project, load_tree(tree_path), tree_bytes=tree_path.read_bytes(), settings=conf)
    state = drive_run(
        project=project, settings=conf, agent=agent, sandbox=LocalSandbox(), workers=4
    )
    return state, agent, project


def item_events(project: ProjectDir, key: tuple[str, Phase]) -> list[object]:
    return [
        e
        for e in read_events(project.audit_path)[0]
        if getattr(e, "component_id", None) == key[0] and getattr(e, "phase", None) == key[1]
    ]


@pytest.fixture(scope="module")
def blocking_run(
    tmp_path_factory: pytest.TempPathFactory, example: Path
) -> tuple[RunState, ReplayAgent, ProjectDir]:
    return run(
        example, example / "replay", tmp_path_factory.mktemp("blocking") / "p", gates="blocking"
    )


def test_blocking_rejects_a_teachback_that_omits_an_error_case_then_approves_the_corrected_one(
    blocking_run: tuple[RunState, ReplayAgent, ProjectDir],
) -> None:
    state, _, project = blocking_run
    assert state.status is RunStatus.COMPLETED
    events = item_events(project, GATED)
    kinds = [(type(e).__name__, getattr(e, "attempt", 0)) for e in events]
    dispatches = [e for e in events if isinstance(e, ItemDispatched)]
    assert [d.stage for d in dispatches] == ["teachback", "teachback", "audit", "work", "audit"]
    reviews = [e for e in events if isinstance(e, TeachbackReviewed)]
    # The checker rejects the first, approves the second; the auditor approves it too.
    assert [(r.approved, r.reviewer) for r in reviews] == [
        (False, "checker"),
        (True, "checker"),
        (True, "auditor"),
    ]
    assert [r.audit_next for r in reviews] == [False, True, False]
    assert len(reviews[0].findings) == 1
    assert "'argument_not_node' of function 'Call'" in reviews[0].findings[0]
    # The log's order: the work call is dispatched only after the approval.
    first_work = kinds.index(("ItemDispatched", 4))
    assert kinds.index(("TeachbackReviewed", 3)) < first_work
    assert kinds[:first_work].count(("TeachbackSubmitted", 1)) == 1
    assert any(isinstance(e, ItemSucceeded) and e.attempt == 5 for e in events)
    # The corrections went back to the agent with the second teachback.
    assert any("argument_not_node" in f.summary for f in dispatches[1].feedback)
    record = dispatches[0].gate
    assert record is not None and record.score >= 7 and record.gates.teachback_mode == "blocking"
    assert state.item(*GATED).gates.state == "audited"
    assert state.item(*GATED).gates.teachback_rounds == 1


def test_blocking_makes_the_work_call_only_after_the_approved_teachback(
    blocking_run: tuple[RunState, ReplayAgent, ProjectDir],
) -> None:
    _, agent, _ = blocking_run
    calls = [c for c in agent.calls if (c.component_id, c.phase) == GATED]
    assert [(c.attempt, c.teachback, c.role) for c in calls] == [
        (1, True, Role.CODE_AUTHOR),
        (2, True, Role.CODE_AUTHOR),
        (3, False, Role.AUDITOR),
        (4, False, Role.CODE_AUTHOR),
        (5, False, Role.AUDITOR),
    ]
    # The auditor's first review is of the approved teachback, before any work.
    assert "teachback.json" in calls[2].inputs["teachback"]
    assert any("argument_not_node" in f.summary for f in calls[1].feedback)


def test_blocking_lets_low_risk_components_proceed_without_a_teachback(
    blocking_run: tuple[RunState, ReplayAgent, ProjectDir],
) -> None:
    state, agent, project = blocking_run
    teachbacks = {(c.component_id, c.phase) for c in agent.calls if c.teachback}
    assert teachbacks == {GATED}
    for event in read_events(project.audit_path)[0]:
        if isinstance(event, ItemDispatched) and (event.component_id, event.phase) != GATED:
            assert event.stage == "work"
            assert event.gate is not None
            if event.phase in (Phase.IMPLEMENT, Phase.INTEGRATE):
                assert event.gate.score < 7, event.component_id
    assert all(i.status is ItemStatus.DONE for i in state.items.values())


def test_advisory_completes_with_one_would_have_blocked_event_and_no_teachback(
    tmp_path: Path, example: Path
) -> None:
    state, agent, project = run(example, example / "replay", tmp_path / "p")
    assert state.status is RunStatus.COMPLETED
    events = read_events(project.audit_path)[0]
    blocked = [e for e in events if isinstance(e, GateWouldHaveBlocked)]
    assert len(blocked) == 1
    assert (blocked[0].component_id, blocked[0].phase) == GATED
    assert "score 7" in blocked[0].reason
    assert not any(isinstance(e, TeachbackSubmitted | TeachbackReviewed) for e in events)
    assert not any(c.teachback for c in agent.calls)
    assert state.item(*GATED).gates.would_have_blocked


def test_teachbacks_rejected_too_often_fail_the_item_with_the_reason(
    tmp_path: Path, example: Path, replay_copy: Path
) -> None:
    # Every teachback of ast_nodes omits the same error case.
    bad = replay_copy / "ast_nodes" / "attempts" / "teachback-1" / "teachback.json"
    (replay_copy / "ast_nodes" / "teachback.json").write_bytes(bad.read_bytes())
    gates = {"mode": "blocking", "max_teachback_rounds": 2}
    state, agent, project = run(example, replay_copy, tmp_path / "p", gates=gates)
    item = state.item(*GATED)
    assert item.status is ItemStatus.FAILED
    assert state.status is RunStatus.FAILED
    failed = [e for e in item_events(project, GATED) if isinstance(e, ItemFailed)]
    assert failed[-1].error_type == "teachback_rejected"
    assert "argument_not_node" in failed[-1].error
    work_calls = [c for c in agent.calls if (c.component_id, c.phase) == GATED and not c.teachback]
    assert work_calls == []
    assert state.item("parser", Phase.IMPLEMENT).status is ItemStatus.POISONED


def test_review_gated_holds_the_high_risk_item_and_pauses_the_run(
    tmp_path: Path, example: Path
) -> None:
    state, _, project = run(example, example / "replay", tmp_path / "p", review="gated")
    assert state.status is RunStatus.PAUSED
    item = state.item(*GATED)
    assert item.status is ItemStatus.AWAITING_REVIEW
    assert not (project.implementations_dir / "ast_nodes").exists()
    events = read_events(project.audit_path)[0]
    assert any(isinstance(e, ReviewRequested) for e in events)
    paused = [e for e in events if isinstance(e, RunPaused)]
    assert paused and "await review" in paused[-1].reason
    # What depends on it waits; nothing else was held.
    assert state.item("parser", Phase.IMPLEMENT).status is ItemStatus.PENDING
    held = [i for i in state.items.values() if i.status is ItemStatus.AWAITING_REVIEW]
    assert held == [item]
    # Waiting on a human holds no worker and no lease: no stall timer runs for it.
    assert state.in_flight() == []


def write_teachback(replay: Path, component_id: str) -> None:
    """A teachback naming everything in the component's contract."""
    contract = json.loads((replay / component_id / "interface.json").read_text())
    doc = {
        "component_id": component_id,
        "produces": f"src/{component_id}.py",
        "functions": [f["name"] for f in contract["functions"]],
        "error_cases": [
            {"function": f["name"], "name": e["name"]}
            for f in contract["functions"]
            for e in f["error_cases"]
        ],
        "uses": contract.get("dependencies", []),
    }
    (replay / component_id / "teachback.json").write_text(json.dumps(doc))


def test_blocking_has_the_auditor_review_the_verified_attempt_before_promotion(
    blocking_run: tuple[RunState, ReplayAgent, ProjectDir],
) -> None:
    _, agent, project = blocking_run
    events = item_events(project, GATED)
    kinds = [type(e).__name__ for e in events]
    assert kinds.index("AuditRequested") < kinds.index("AuditReviewed")
    assert kinds.index("AuditReviewed") < kinds.index("ItemSucceeded")
    assert kinds.index("ItemSucceeded") < kinds.index("ArtifactsPromoted")
    audits = [c for c in agent.calls if c.role is Role.AUDITOR]
    assert [(c.component_id, c.attempt) for c in audits] == [("ast_nodes", 3), ("ast_nodes", 5)]
    # The second sees the attempt under review and the contract.
    assert "src/ast_nodes.py" in audits[1].inputs["output"]
    assert "interface.json" in audits[1].inputs["contract"]


def test_the_auditor_rejecting_an_implementation_sends_feedback_to_the_next_attempt(
    tmp_path: Path, example: Path, replay_copy: Path
) -> None:
    rejecting = replay_copy / "ast_nodes" / "attempts" / "audit-5"
    rejecting.mkdir(parents=True)
    finding = "free_variables returns a list; the contract says the names are sorted and unique"
    (rejecting / "audit.json").write_text(json.dumps({"approved": False, "findings": [finding]}))
    script = yaml.safe_load((replay_copy / "replay.yaml").read_text())
    script["script"]["ast_nodes"]["implement"][5] = {"files": "ast_nodes/attempts/audit-5"}
    (replay_copy / "replay.yaml").write_text(yaml.safe_dump(script))
    state, agent, project = run(example, replay_copy, tmp_path / "p", gates="blocking")
    assert state.status is RunStatus.COMPLETED
    events = item_events(project, GATED)
    reviewed = [e for e in events if isinstance(e, AuditReviewed)]
    assert [(e.attempt, e.approved) for e in reviewed] == [(5, False), (7, True)]
    failed = [e for e in events if isinstance(e, ItemFailed)]
    assert [(e.attempt, e.error_type) for e in failed] == [(5, "audit_rejected")]
    assert finding in failed[0].error
    work = [
        c
        for c in agent.calls
        if (c.component_id, c.phase) == GATED and c.role is not Role.AUDITOR and not c.teachback
    ]
    assert [c.attempt for c in work] == [4, 6]
    assert any(finding in note.summary for note in work[1].feedback)
    assert [e.attempt for e in events if isinstance(e, ItemSucceeded)] == [7]


def test_an_attempt_the_harness_rejected_is_never_promoted_whatever_the_auditor_says(
    tmp_path: Path, example: Path, replay_copy: Path
) -> None:
    # evaluator's risk set to 4 makes it gated; its first work call (attempt 3, after
    # the teachback and the auditor's review of it) serves the implementation that
    # fails 2 of its tests, and its auditor approves everything it is shown.
    write_teachback(replay_copy, "evaluator")
    (replay_copy / "evaluator" / "audit.json").write_text('{"approved": true}')
    script = yaml.safe_load((replay_copy / "replay.yaml").read_text())
    script["script"]["evaluator"]["implement"] = {3: {"files": "evaluator/attempts/implement-1"}}
    (replay_copy / "replay.yaml").write_text(yaml.safe_dump(script))
    gates = {"mode": "blocking", "evaluator": {"risk": 4}}
    state, agent, project = run(example, replay_copy, tmp_path / "p", gates=gates)
    assert state.status is RunStatus.COMPLETED
    key = ("evaluator", Phase.IMPLEMENT)
    events = item_events(project, key)
    failed = [e for e in events if isinstance(e, ItemFailed)]
    assert [(e.attempt, e.error_type) for e in failed] == [(3, "tests_failed")]
    assert [e.attempt for e in events if isinstance(e, AuditRequested)] == [4]
    audited = [
        c
        for c in agent.calls
        if c.role is Role.AUDITOR and c.component_id == "evaluator" and "output" in c.inputs
    ]
    assert [c.attempt for c in audited] == [5]
    dispatched = [e for e in events if isinstance(e, ItemDispatched)]
    assert dispatched[0].gate is not None and dispatched[0].gate.overrides == {"risk": 4}
    promoted = (project.implementations_dir / "evaluator" / "src" / "evaluator.py").read_bytes()
    assert promoted == (replay_copy / "evaluator" / "src" / "evaluator.py").read_bytes()
    rejected = replay_copy / "evaluator" / "attempts" / "implement-1" / "src" / "evaluator.py"
    assert promoted != rejected.read_bytes()


def test_review_all_holds_every_verified_implementation_whatever_its_score(
    tmp_path: Path, example: Path
) -> None:
    state, _, project = run(example, example / "replay", tmp_path / "p", review="all")
    assert state.status is RunStatus.PAUSED
    held = sorted(key for key, i in state.items.items() if i.status is ItemStatus.AWAITING_REVIEW)
    # The leaves that depend on no other component are verified first, and all wait,
    # scores 6 and 7 alike; nothing was promoted past its contract and tests.
    assert held == ["ast_nodes/implement", "environment/implement", "tokens/implement"]
    scores = {key: state.items[key].gates.record.score for key in held}  # type: ignore[union-attr]
    assert scores["ast_nodes/implement"] == 7 and scores["tokens/implement"] == 6
    assert not project.implementations_dir.exists() or not any(
        project.implementations_dir.iterdir()
    )
