"""Failure policy in real runs: retries, systemic pauses, budgets, stalls, resume.

The local executor and sandbox run the real contract tests; the replay agent
is scripted per component, phase and attempt.
"""

from __future__ import annotations

import shutil
import threading
from pathlib import Path
from typing import Any

import pytest
import yaml

from pact_workers.agents.replay import ReplayAgent
from pact_workers.models import ItemStatus, Phase, SuspensionKind
from pact_workers.models.tree import load_tree
from pact_workers.models.work import IN_FLIGHT
from pact_workers.sandbox import LocalSandbox
from scheduler.audit import read_events
from scheduler.commands import drive_run, resume_run
from scheduler.events import ItemDispatched, ItemFailed, RunPaused, RunResumed
from scheduler.launch import start_run
from scheduler.project import ProjectDir
from scheduler.settings import Settings
from scheduler.state import RunState, RunStatus

FAST: dict[str, Any] = {"backoff_base_s": 0.05, "backoff_cap_s": 0.2}
BROKEN = ("tokens", "ast_nodes", "environment")


def script(replay: Path, steps: dict[str, Any]) -> None:
    doc = yaml.safe_load((replay / "replay.yaml").read_text())
    doc["script"] = steps
    (replay / "replay.yaml").write_text(yaml.safe_dump(doc))


def start(example: Path, replay: Path, root: Path, **settings: Any) -> tuple[ProjectDir, Settings]:
    project = ProjectDir(root)
    root.mkdir(parents=True, exist_ok=True)
    (root / "pact.yaml").write_text(yaml.safe_dump({**FAST, **settings}))
    conf = Settings.model_validate({**FAST, **settings})
    tree = example / "tree.json"
    start_run(
        project,
        load_tree(tree),
        tree_bytes=tree.read_bytes(),
        settings=conf,
        agent="replay",
        agent_options={"replay_dir": str(replay)},
    )
    return project, conf


def drive(project: ProjectDir, conf: Settings, replay: Path, workers: int = 4) -> RunState:
    return drive_run(
        project=project,
        settings=conf,
        agent=ReplayAgent(replay),
        sandbox=LocalSandbox(),
        workers=workers,
    )


def test_transient_retries_three_times(example: Path, replay_copy: Path, tmp_path: Path) -> None:
    flaky = {n: {"transient": "HTTP 529 overloaded"} for n in (1, 2, 3)}
    script(replay_copy, {"tokens": {"contract": flaky}})
    project, conf = start(example, replay_copy, tmp_path / "ok")
    state = drive(project, conf, replay_copy)
    assert state.status is RunStatus.COMPLETED
    events, _ = read_events(project.audit_path)
    fails = [e for e in events if isinstance(e, ItemFailed) and e.component_id == "tokens"]
    assert [(e.attempt, e.decision) for e in fails] == [(1, "retry"), (2, "retry"), (3, "retry")]
    retry_at = [e.retry_at for e in fails]
    assert all(r is not None for r in retry_at)

    # A fourth transient failure exceeds max_retries (3): a transient failure never fails
    # a run, so the run pauses for a human (suspended far), and nothing is poisoned.
    script(replay_copy, {"tokens": {"contract": {**flaky, 4: {"transient": "HTTP 529"}}}})
    project, conf = start(example, replay_copy, tmp_path / "exhausted")
    state = drive(project, conf, replay_copy)
    item = state.item("tokens", Phase.CONTRACT)
    # Waiting (it waits for nothing else, so ready), not failed.
    assert item.status is ItemStatus.READY and item.transient_failures == 4
    assert item.suspension is SuspensionKind.FAR and state.status is RunStatus.PAUSED
    assert not [
        i for i in state.items.values() if i.status in {ItemStatus.FAILED, ItemStatus.POISONED}
    ]


def broken_imports(replay: Path, attempts: tuple[int, ...] = (1, 2, 3)) -> None:
    steps: dict[str, Any] = {}
    for cid in BROKEN:
        src = replay / "broken" / cid / "src"
        src.mkdir(parents=True)
        original = (replay / cid / "src" / f"{cid}.py").read_text()
        future = "from __future__ import annotations\n"
        assert future in original
        broken = original.replace(future, future + "import numpy_extras_v2  # not installed\n", 1)
        (src / f"{cid}.py").write_text(broken)
        steps[cid] = {"implement": {n: {"files": f"broken/{cid}"} for n in attempts}}
    script(replay, steps)


def test_systemic_pauses_not_fails(example: Path, replay_copy: Path, tmp_path: Path) -> None:
    broken_imports(replay_copy)
    project, conf = start(example, replay_copy, tmp_path / "p")
    state = drive(project, conf, replay_copy)
    assert state.status is RunStatus.PAUSED
    assert state.pattern_type == "import_error"
    assert sorted(state.affected_components) == sorted(BROKEN)
    assert "numpy_extras_v2" in state.recommendation
    assert not [i for i in state.items.values() if i.status is ItemStatus.FAILED]


def test_three_identical_import_errors_pause_then_resume_completes(
    example: Path, replay_copy: Path, tmp_path: Path
) -> None:
    broken_imports(replay_copy)
    project, conf = start(example, replay_copy, tmp_path / "p")
    drive(project, conf, replay_copy)
    events, _ = read_events(project.audit_path)
    pause = next(i for i, e in enumerate(events) if isinstance(e, RunPaused))
    failed = [
        e.component_id
        for e in events[:pause]
        if isinstance(e, ItemFailed) and e.phase is Phase.IMPLEMENT
    ]
    # The pause follows the third component's failure at once ...
    assert len(set(failed)) == 3 and isinstance(events[pause - 1], ItemFailed)
    # ... and nothing more is dispatched after it.
    assert not [e for e in events[pause:] if isinstance(e, ItemDispatched)]

    # Resuming with the replay data still broken pauses again (the pattern persists).
    state, _ = resume_run(project_dir=project.root)
    assert state.status is RunStatus.PAUSED

    # Fix the data (drop the scripted broken attempts) and resume: the run completes.
    script(replay_copy, {})
    state, _ = resume_run(project_dir=project.root)
    assert state.status is RunStatus.COMPLETED
    events, _ = read_events(project.audit_path)
    resumes = [e for e in events if isinstance(e, RunResumed)]
    assert len(resumes) == 2 and "systemic failure" in resumes[0].original_reason


def test_budget_is_enforced_before_dispatch_and_resume_continues_after_raising_it(
    example: Path, replay_copy: Path, tmp_path: Path
) -> None:
    project, conf = start(example, replay_copy, tmp_path / "p", budget_usd=0.5)
    state = drive(project, conf, replay_copy)
    assert state.status is RunStatus.FAILED and "budget" in state.fail_reason
    spent = state.usage.cost_usd
    # Spend stops at the first dispatch decision past the cap (in-flight work finishes).
    assert 0.5 <= spent < 0.5 + 4 * 0.07
    suspended = [i for i in state.items.values() if i.status is ItemStatus.SUSPENDED]
    assert suspended and all(i.suspension is SuspensionKind.FAR for i in suspended)
    (project.root / "pact.yaml").write_text(yaml.safe_dump({**FAST, "budget_usd": 50.0}))
    state, _ = resume_run(project_dir=project.root)
    assert state.status is RunStatus.COMPLETED
    assert state.usage.cost_usd > spent


def test_a_phase_cap_stops_that_phase_only(
    example: Path, replay_copy: Path, tmp_path: Path
) -> None:
    # Contracts cost $0.0618 each: a cap of 3% of $10 ($0.30) pays for four; a fifth
    # would pass it, so it is never dispatched (attempts in flight count against the cap).
    project, conf = start(
        example, replay_copy, tmp_path / "p", budget_usd=10.0, phase_caps={"contract": 0.03}
    )
    state = drive(project, conf, replay_copy)
    assert state.status is RunStatus.FAILED and "'contract'" in state.fail_reason
    assert state.spend_by_phase["contract"] == pytest.approx(4 * 0.0618)
    assert state.spend_by_phase.get("test", 0.0) > 0  # other phases went on


class _Hang:
    """Wraps the replay agent; the first implement attempt of one component hangs."""

    def __init__(self, inner: ReplayAgent, component: str) -> None:
        self.name = "hang"
        self.inner, self.component = inner, component
        self.release = threading.Event()

    def produce(self, request: Any) -> Any:
        if (request.component_id, request.phase, request.attempt) == (
            self.component,
            Phase.IMPLEMENT,
            1,
        ):
            self.release.wait(60)
        return self.inner.produce(request)


def test_a_stalled_attempt_is_retried_and_its_late_result_dropped(
    example: Path, replay_copy: Path, tmp_path: Path
) -> None:
    project, conf = start(
        example,
        replay_copy,
        tmp_path / "p",
        role_timeouts={"code_author": 30},
        impatience="impatient",
    )
    # impatient halves 30 s, but the floor is 30 s: shorten time with a fast clock instead.
    agent = _Hang(ReplayAgent(replay_copy), "environment")
    clock_offset = [0.0]

    import time

    def clock() -> float:
        return time.time() + clock_offset[0]

    from scheduler.executors.local import LocalExecutor
    from scheduler.run import RunController

    store = project.store()
    executor = LocalExecutor(workers=4, agent=agent, sandbox=LocalSandbox(), store=store)

    aged = [False]

    def listener(event: Any, state: RunState) -> None:
        running = [i for i in state.items.values() if i.status in IN_FLIGHT]
        hung = state.item("environment", Phase.IMPLEMENT)
        if not aged[0] and hung.attempt == 1 and running == [hung]:
            # Once the hung attempt is the only one in flight (so that no other looks
            # stalled too), it looks 31 s old at the next check.
            aged[0] = True
            clock_offset[0] += 31.0
        if isinstance(event, ItemFailed) and event.error_type == "stalled":
            agent.release.set()

    try:
        state = RunController(
            project, executor=executor, store=store, settings=conf, clock=clock, listener=listener
        ).drive()
    finally:
        agent.release.set()
        executor.close()
    assert state.status is RunStatus.COMPLETED
    events, _ = read_events(project.audit_path)
    stalled = [e for e in events if isinstance(e, ItemFailed) and e.error_type == "stalled"]
    assert len(stalled) == 1 and stalled[0].suspension is SuspensionKind.WILD
    assert state.item("environment", Phase.IMPLEMENT).attempt == 2


def test_copy_is_private(replay_copy: Path, example: Path) -> None:
    shutil.rmtree(replay_copy / "tokens")
    assert (example / "replay" / "tokens").is_dir()


def test_classify_repeated_same_error_as_systemic_in_a_run(
    example: Path, replay_copy: Path, tmp_path: Path
) -> None:
    refused = {1: {"permanent": "PermissionDeniedError: model access revoked"}}
    script(
        replay_copy, {cid: {"contract": refused} for cid in ("tokens", "ast_nodes", "environment")}
    )
    project, conf = start(example, replay_copy, tmp_path / "p")
    state = drive(project, conf, replay_copy)
    assert state.status is RunStatus.PAUSED and state.pattern_type == "repeated_error"
    assert state.affected_components == ["ast_nodes", "environment", "tokens"]
    script(replay_copy, {})
    state, _ = resume_run(project_dir=project.root)
    assert state.status is RunStatus.COMPLETED
