"""The action cache in embedded runs: local executor, local sandbox, real verifications.

Each test runs a tree into one project directory (which records its verified results
in a cache directory of its own), then the same tree into another; the agents count
their calls, and the audit logs say what was served, dropped and verified.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest

from pact_workers.agents.base import Agent, AgentOutput, AgentRequest
from pact_workers.agents.noop import NoopAgent
from pact_workers.agents.replay import ReplayAgent
from pact_workers.models import ItemStatus, Phase
from pact_workers.models.tree import DecompositionTree, load_tree
from pact_workers.sandbox import LocalSandbox
from scheduler.audit import read_events
from scheduler.cache import CacheEntry, DirectoryActionCache
from scheduler.commands import drive_run
from scheduler.events import (
    CacheDropped,
    CacheHit,
    ContractChecked,
    Event,
    ItemDispatched,
    ItemFailed,
    ItemSucceeded,
)
from scheduler.launch import start_run
from scheduler.project import ProjectDir
from scheduler.settings import Settings
from scheduler.state import RunState, RunStatus
from tests.runs import star_tree

FAST = {"backoff_base_s": 0.05, "backoff_cap_s": 0.2}


class Counting:
    """An agent that counts the calls made to it, by (component, phase)."""

    def __init__(self, agent: Agent) -> None:
        self.agent = agent
        self.name = getattr(agent, "name", "agent")
        self.calls: list[tuple[str, Phase]] = []
        self._lock = threading.Lock()

    def produce(self, request: AgentRequest) -> AgentOutput:
        with self._lock:
            self.calls.append((request.component_id, request.phase))
        return self.agent.produce(request)


def run(
    tree: DecompositionTree,
    project_dir: Path,
    cache: DirectoryActionCache,
    *,
    agent: str,
    replay: Path | None = None,
    mode: str | None = None,
) -> tuple[RunState, Counting, list[Event]]:
    """Run ``tree`` into ``project_dir`` with ``cache`` (pact.yaml's ``cache:`` is
    ``mode``) and an agent that counts its calls."""
    project = ProjectDir(project_dir)
    conf = Settings.model_validate({**FAST, "cache": mode})
    options = {"replay_dir": str(replay)} if replay else {}
    start_run(
        project,
        tree,
        tree_bytes=json.dumps(tree.model_dump(mode="json")).encode(),
        settings=conf,
        agent=agent,
        agent_options=options,
    )
    counting = Counting(ReplayAgent(replay) if replay else NoopAgent())
    state = drive_run(
        project=project,
        settings=conf,
        agent=counting,
        sandbox=LocalSandbox(),
        workers=4,
        cache=cache,
    )
    events, _ = read_events(project.audit_path)
    return state, counting, events


def of(events: list[Event], kind: type[Any]) -> list[Any]:
    return [e for e in events if isinstance(e, kind)]


def promoted(project_dir: Path) -> dict[str, bytes]:
    project = ProjectDir(project_dir)
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


def entries(cache: DirectoryActionCache) -> list[CacheEntry]:
    found = []
    for path in sorted((cache.root / "entries").rglob("*.json")):
        entry = CacheEntry.model_validate_json(path.read_bytes())
        found.append(entry)
    return found


def forge(cache: DirectoryActionCache, component_id: str, phase: Phase, files: dict[str, bytes]):
    """Put ``files`` in the cache as the verified result of (component, phase)."""
    entry = next(e for e in entries(cache) if (e.component_id, e.phase) == (component_id, phase))
    output = cache.store.put_bundle(files)
    cache.put(entry.model_copy(update={"output": output, "files": sorted(files)}), files)
    return entry, output


@pytest.fixture
def cache(tmp_path: Path) -> DirectoryActionCache:
    return DirectoryActionCache(tmp_path / "cache")


@pytest.fixture
def replay_dir(example: Path) -> Path:
    return example / "replay"


@pytest.fixture
def example_tree(example: Path) -> DecompositionTree:
    return load_tree(example / "tree.json")


def test_the_same_tree_in_another_project_is_served_from_the_cache_at_no_cost(
    tmp_path: Path, cache: DirectoryActionCache, example_tree: DecompositionTree, replay_dir: Path
) -> None:
    first, agent1, events1 = run(
        example_tree, tmp_path / "a", cache, agent="replay", replay=replay_dir, mode="verify"
    )
    assert first.status is RunStatus.COMPLETED and first.usage.cost_usd > 0
    items = len(first.items)
    assert len(agent1.calls) > items  # the example retries one implementation
    assert not of(events1, CacheHit)

    second, agent2, events2 = run(
        example_tree, tmp_path / "b", cache, agent="replay", replay=replay_dir, mode="verify"
    )
    assert second.status is RunStatus.COMPLETED
    assert agent2.calls == []  # no agent call at all
    assert second.usage.cost_usd == 0 and second.usage.input_tokens == 0
    hits = of(events2, CacheHit)
    assert len(hits) == items and all(not h.trusted for h in hits)
    assert {h.source_run for h in hits} == {first.run_id}
    saved = sum(h.saved.cost_usd for h in hits)
    accepted = sum(e.usage.cost_usd for e in of(events1, ItemSucceeded))
    assert saved == pytest.approx(accepted)
    assert all(i.cache == "hit" for i in second.items.values())
    # Verified again: each implementation's contract tests ran in this run too.
    implemented = [
        i for i in second.items.values() if i.phase in {Phase.IMPLEMENT, Phase.INTEGRATE}
    ]
    assert all(i.test_results and i.test_results.all_passed for i in implemented)
    assert promoted(tmp_path / "b") == promoted(tmp_path / "a")


def test_replay_runs_use_no_cache_unless_pact_yaml_asks(
    tmp_path: Path, cache: DirectoryActionCache, example_tree: DecompositionTree, replay_dir: Path
) -> None:
    run(example_tree, tmp_path / "a", cache, agent="replay", replay=replay_dir)
    assert not cache.root.exists()
    _, _, events = run(example_tree, tmp_path / "b", cache, agent="replay", replay=replay_dir)
    assert not of(events, CacheHit) and not cache.root.exists()
    # The demo's script still plays: a failed implementation, then its retry.
    assert [e.component_id for e in of(events, ItemFailed) if e.error_type == "tests_failed"]
    assert not any(e.action_key for e in of(events, ItemDispatched))


def test_only_verified_results_are_cached_and_only_once_their_success_is_on_disk(
    tmp_path: Path, example_tree: DecompositionTree, replay_dir: Path
) -> None:
    audit = ProjectDir(tmp_path / "a").audit_path

    class Checking(DirectoryActionCache):
        """Checks, as each entry is written, that the log on disk holds its success."""

        seen: list[bool] = []

        def put(self, entry: CacheEntry, files: dict[str, bytes]) -> None:  # type: ignore[override]
            on_disk = [json.loads(line) for line in audit.read_text().splitlines()]
            self.seen.append(
                any(
                    e["type"] == "item_succeeded"
                    and (e["component_id"], e["phase"], e["output"])
                    == (entry.component_id, entry.phase.value, entry.output)
                    for e in on_disk
                )
            )
            super().put(entry, files)

    cache = Checking(tmp_path / "cache")
    state, _, events = run(
        example_tree, tmp_path / "a", cache, agent="replay", replay=replay_dir, mode="verify"
    )
    assert state.status is RunStatus.COMPLETED
    assert Checking.seen and all(Checking.seen)
    recorded = entries(cache)
    succeeded = {(e.component_id, e.phase, e.output) for e in of(events, ItemSucceeded)}
    assert {(e.component_id, e.phase, e.output) for e in recorded} == succeeded
    rejected = {e.output for e in of(events, ItemFailed) if e.output}
    assert rejected and not rejected & {e.output for e in recorded}


def test_a_hit_the_harness_rejects_is_dropped_and_the_agent_asked_in_the_same_attempt(
    tmp_path: Path, cache: DirectoryActionCache
) -> None:
    tree = star_tree(3)
    run(tree, tmp_path / "a", cache, agent="noop", mode="verify")
    bad = {"src/c2.py": b"NOOP = False\n"}  # fails the contract test `assert c2.NOOP`
    _, bad_output = forge(cache, "c2", Phase.IMPLEMENT, bad)

    state, agent, events = run(tree, tmp_path / "b", cache, agent="noop", mode="verify")
    assert state.status is RunStatus.COMPLETED
    assert agent.calls == [("c2", Phase.IMPLEMENT)]  # the rejected hit only
    dropped = of(events, CacheDropped)
    assert [(d.component_id, d.phase, d.output, d.redispatch) for d in dropped] == [
        ("c2", Phase.IMPLEMENT, bad_output, False)
    ]
    item = state.item("c2", Phase.IMPLEMENT)
    assert item.status is ItemStatus.DONE and item.cache == "dropped" and item.attempt == 1
    assert item.output != bad_output and item.rejections == 0
    assert len(of(events, CacheHit)) == len(state.items) - 1
    # The agent's verified answer replaced the bad entry.
    good = next(e for e in entries(cache) if (e.component_id, e.phase) == ("c2", Phase.IMPLEMENT))
    assert good.output == item.output and good.run_id == state.run_id


def test_a_cached_contract_the_runs_checks_reject_is_dropped_and_the_agent_asked(
    tmp_path: Path, cache: DirectoryActionCache
) -> None:
    tree = star_tree(2)
    run(tree, tmp_path / "a", cache, agent="noop", mode="verify")
    contract = {
        "component_id": "c1",
        "name": "c1",
        "description": "c1 (noop contract)",
        "external_dependencies": ["no_such_module_anywhere"],
    }
    forge(cache, "c1", Phase.CONTRACT, {"interface.json": json.dumps(contract).encode()})

    state, agent, events = run(tree, tmp_path / "b", cache, agent="noop", mode="verify")
    assert state.status is RunStatus.COMPLETED
    assert agent.calls == [("c1", Phase.CONTRACT)]
    checks = [e for e in of(events, ContractChecked) if e.component_id == "c1"]
    assert [c.accepted for c in checks] == [False, True]  # the cached one, the agent's
    [dropped] = of(events, CacheDropped)
    assert dropped.redispatch and "no_such_module_anywhere" in dropped.reason
    dispatches = [e for e in of(events, ItemDispatched) if e.component_id == "c1"]
    contract_dispatches = [d for d in dispatches if d.phase is Phase.CONTRACT]
    assert [d.cached is not None for d in contract_dispatches] == [True, False]
    item = state.item("c1", Phase.CONTRACT)
    assert item.attempt == 2 and item.rejections == 0 and not item.failures


def test_trust_serves_a_hit_without_running_the_harness_again(
    tmp_path: Path, cache: DirectoryActionCache
) -> None:
    tree = star_tree(2)
    first, _, _ = run(tree, tmp_path / "a", cache, agent="noop", mode="verify")
    # A result the harness would reject now: under trust, nobody checks it again.
    _, bad_output = forge(cache, "c1", Phase.IMPLEMENT, {"src/c1.py": b"NOOP = False\n"})

    state, agent, events = run(tree, tmp_path / "b", cache, agent="noop", mode="trust")
    assert state.status is RunStatus.COMPLETED
    # The root's integration sees c1's code, which differs now: another key, a miss.
    assert agent.calls == [("root", Phase.INTEGRATE)]
    hits = of(events, CacheHit)
    assert len(hits) == len(state.items) - 1
    assert all(h.trusted and h.verify_s == 0 for h in hits)
    item = state.item("c1", Phase.IMPLEMENT)
    assert item.output == bad_output
    # What the harness measured when the result was recorded is what the run shows.
    assert item.test_results == first.item("c1", Phase.IMPLEMENT).test_results


def test_cache_off_neither_reads_nor_writes_the_cache(
    tmp_path: Path, cache: DirectoryActionCache
) -> None:
    tree = star_tree(2)
    run(tree, tmp_path / "a", cache, agent="noop", mode="verify")
    before = sorted(p.name for p in cache.root.rglob("*"))
    state, agent, events = run(tree, tmp_path / "b", cache, agent="noop", mode="off")
    assert state.status is RunStatus.COMPLETED
    assert len(agent.calls) == len(state.items) and not of(events, CacheHit)
    assert sorted(p.name for p in cache.root.rglob("*")) == before
