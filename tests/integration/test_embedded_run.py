"""The embedded run end to end: local executor, local sandbox, replay agent.

Real subprocesses run the real contract tests; only the agent is a replay.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from pact_workers.agents.replay import ReplayAgent
from pact_workers.agents.roles import render_prompt
from pact_workers.models import ItemStatus, Phase
from pact_workers.models.tree import load_tree
from pact_workers.sandbox import LocalSandbox
from scheduler.audit import read_events
from scheduler.commands import drive_run
from scheduler.events import ItemDispatched, ItemFailed, ItemsPoisoned
from scheduler.launch import start_run
from scheduler.project import ProjectDir
from scheduler.settings import Settings
from scheduler.state import RunState, RunStatus

FAST = {"backoff_base_s": 0.05, "backoff_cap_s": 0.2}


def run_example(
    example: Path, replay: Path, project_dir: Path, *, workers: int = 4, **settings: object
) -> tuple[RunState, ReplayAgent, ProjectDir]:
    tree_path = example / "tree.json"
    project = ProjectDir(project_dir)
    conf = Settings.model_validate({**FAST, **settings})
    agent = ReplayAgent(replay)
    start_run(project, load_tree(tree_path), tree_bytes=tree_path.read_bytes(), settings=conf)
    state = drive_run(
        project=project, settings=conf, agent=agent, sandbox=LocalSandbox(), workers=workers
    )
    return state, agent, project


def artifacts(project: ProjectDir) -> dict[str, bytes]:
    out = {}
    for base in (project.contracts_dir, project.implementations_dir):
        for path in sorted(base.rglob("*")):
            # Provenance sidecars (*.meta.json) name the run, its times and workers, like
            # test_results.json: records, not artifacts.
            if (
                path.is_file()
                and path.name != "test_results.json"
                and not path.name.endswith(".meta.json")
            ):
                out[path.relative_to(project.root).as_posix()] = path.read_bytes()
    return out


@pytest.fixture(scope="module")
def example_run(
    tmp_path_factory: pytest.TempPathFactory, example: Path
) -> tuple[RunState, ReplayAgent, ProjectDir]:
    return run_example(example, example / "replay", tmp_path_factory.mktemp("run") / "proj")


def test_every_component_of_the_example_is_implemented(example_run: tuple) -> None:
    state, _, project = example_run
    assert state.status is RunStatus.COMPLETED
    assert all(i.status is ItemStatus.DONE for i in state.items.values())
    assert state.tree is not None
    for cid, node in state.tree.nodes.items():
        final = Phase.IMPLEMENT if node.is_leaf else Phase.INTEGRATE
        results = state.item(cid, final).test_results
        assert results is not None and results.all_passed
        on_disk = json.loads((project.implementations_dir / cid / "test_results.json").read_text())
        assert on_disk["passed"] == results.passed > 0
        assert (project.implementations_dir / cid / "src" / f"{cid}.py").is_file()
        assert (project.contracts_dir / cid / "interface.json").is_file()
        assert (project.contracts_dir / cid / "tests" / "contract_test.py").is_file()


def test_audit_log_shows_failed_then_passed_attempt_with_feedback(
    example_run: tuple, example: Path
) -> None:
    _, _, project = example_run
    script = yaml.safe_load((example / "replay" / "replay.yaml").read_text())["script"]
    flaky_impl = next(c for c, phases in script.items() if "implement" in phases)
    events, warnings = read_events(project.audit_path)
    assert warnings == []
    mine = [
        e
        for e in events
        if getattr(e, "component_id", None) == flaky_impl
        and getattr(e, "phase", None) is Phase.IMPLEMENT
    ]
    kinds = [(e.type, e.attempt) for e in mine if isinstance(e, ItemDispatched | ItemFailed)]
    assert kinds[:3] == [("item_dispatched", 1), ("item_failed", 1), ("item_dispatched", 2)]
    failed = next(e for e in mine if isinstance(e, ItemFailed))
    assert failed.error_type == "tests_failed" and failed.decision == "retry"
    assert failed.test_results is not None and failed.test_results.failed > 0
    second = next(e for e in mine if isinstance(e, ItemDispatched) and e.attempt == 2)
    failing_ids = {f.test_id for f in failed.test_results.failure_details}
    assert second.feedback and {t for t, _ in second.feedback[0].failing_tests} == failing_ids


def test_the_retry_sees_what_the_failed_attempt_wrote(example_run: tuple, example: Path) -> None:
    """The rejected files are kept, and the second attempt's prompt shows them (its
    own code, never the tests) beside the failing tests' names."""
    _, agent, project = example_run
    script = yaml.safe_load((example / "replay" / "replay.yaml").read_text())["script"]
    flaky = next(c for c, phases in script.items() if "implement" in phases)
    first_dir = example / "replay" / script[flaky]["implement"][1]["files"]
    written = {
        p.relative_to(first_dir).as_posix(): p.read_bytes()
        for p in first_dir.rglob("*.py")
        if "__pycache__" not in p.parts
    }
    events, _ = read_events(project.audit_path)
    failed = next(
        e
        for e in events
        if isinstance(e, ItemFailed) and (e.component_id, e.phase) == (flaky, Phase.IMPLEMENT)
    )
    assert failed.output is not None
    assert project.store().get_bundle(failed.output) == written
    retry = next(
        c
        for c in agent.calls
        if (c.component_id, c.phase, c.attempt) == (flaky, Phase.IMPLEMENT, 2)
    )
    assert retry.feedback[0].output == failed.output
    assert retry.previous_outputs == {1: written}
    prompt = render_prompt(retry).user
    assert "### What attempt 1 wrote" in prompt
    source = written[f"src/{flaky}.py"].decode().splitlines()
    assert all(f"+{line}" in prompt for line in source if line.strip())
    tests = (example / "replay" / flaky / "tests" / "contract_test.py").read_text()
    assert not any(line in prompt for line in tests.splitlines() if "def test_" in line)


def test_audit_log_shows_the_transient_retry(example_run: tuple, example: Path) -> None:
    _, _, project = example_run
    events, _ = read_events(project.audit_path)
    transient = [e for e in events if isinstance(e, ItemFailed) and e.error_class == "transient"]
    assert len(transient) == 1
    assert transient[0].decision == "retry" and transient[0].retry_at is not None
    redispatch = [
        e
        for e in events
        if isinstance(e, ItemDispatched)
        and (e.component_id, e.phase) == (transient[0].component_id, transient[0].phase)
    ]
    assert [e.attempt for e in redispatch] == [1, 2]


def test_code_author_never_sees_tests_and_test_author_never_sees_code(example_run: tuple) -> None:
    _, agent, _ = example_run
    for call in agent.calls:
        paths = [p for bundle in call.inputs.values() for p in bundle]
        if call.phase in {Phase.IMPLEMENT, Phase.INTEGRATE}:
            assert not [p for p in paths if p.startswith("tests/") or "contract_test" in p]
            assert "tests" not in call.inputs
        if call.phase is Phase.TEST:
            assert not [p for p in paths if p.startswith("src/")]


def test_each_item_is_dispatched_once_per_attempt(example_run: tuple) -> None:
    _, _, project = example_run
    events, _ = read_events(project.audit_path)
    seen = [(e.component_id, e.phase, e.attempt) for e in events if isinstance(e, ItemDispatched)]
    assert len(seen) == len(set(seen))
    assert [e.seq for e in events] == list(range(1, len(events) + 1))


def test_wavefront_matches_phased_result(example_run: tuple, example: Path, tmp_path: Path) -> None:
    _, _, wave_project = example_run
    state, _, phased = run_example(
        example, example / "replay", tmp_path / "phased", scheduling="phased"
    )
    assert state.status is RunStatus.COMPLETED
    assert artifacts(phased) == artifacts(wave_project)


def test_permanent_failure_poisons_dependents_and_fails_the_run(
    example: Path, replay_copy: Path, tmp_path: Path
) -> None:
    script = yaml.safe_load((replay_copy / "replay.yaml").read_text())
    script["script"] = {"tokens": {"implement": {1: {"permanent": "model refused the task"}}}}
    (replay_copy / "replay.yaml").write_text(yaml.safe_dump(script))
    state, _, _ = run_example(example, replay_copy, tmp_path / "proj")
    assert state.status is RunStatus.FAILED
    assert state.item("tokens", "implement").status is ItemStatus.FAILED
    assert "tokens/implement" in state.fail_reason
    poisoned = {k for k, i in state.items.items() if i.status is ItemStatus.POISONED}
    assert poisoned and all(state.items[k].poisoned_by == "tokens/implement" for k in poisoned)
    assert state.tree is not None
    users = {c for c in state.tree.nodes if "tokens" in state.dependencies.get(c, [])}
    assert {
        f"{c}/{'implement' if state.tree.nodes[c].is_leaf else 'integrate'}" for c in users
    } <= poisoned
    # Everything that does not depend on tokens' implementation still completed.
    assert state.item("ast_nodes", "implement").status is ItemStatus.DONE
    assert state.item("environment", "implement").status is ItemStatus.DONE
    events, _ = read_events(ProjectDir(tmp_path / "proj").audit_path)
    assert sum(isinstance(e, ItemsPoisoned) for e in events) == 1


def test_contract_that_declares_a_cycle_is_a_permanent_error(
    example: Path, replay_copy: Path, tmp_path: Path
) -> None:
    path = replay_copy / "tokens" / "interface.json"
    contract = json.loads(path.read_text())
    contract["dependencies"] = ["lexer"]  # lexer already depends on tokens
    path.write_text(json.dumps(contract))
    state, _, _ = run_example(example, replay_copy, tmp_path / "proj")
    item = state.item("tokens", "contract")
    assert item.status is ItemStatus.FAILED and "cycle" in item.last_error
    assert state.status is RunStatus.FAILED


def test_an_unchanged_rerun_produces_identical_artifacts(
    example_run: tuple, example: Path, tmp_path: Path
) -> None:
    _, _, first = example_run
    shutil.rmtree(tmp_path, ignore_errors=True)
    _, _, second = run_example(example, example / "replay", tmp_path / "again", workers=1)
    assert artifacts(second) == artifacts(first)
