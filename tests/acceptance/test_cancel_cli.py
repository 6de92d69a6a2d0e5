"""``pact cancel`` through the CLI: a running embedded run is cancelled by a person,
no result is applied after the cancel, and ``pact resume`` completes it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import yaml

from tests.acceptance.test_cli import pact
from tests.runs import RunBuilder, star_tree


def events(project: Path) -> list[dict[str, object]]:
    path = project / ".pact" / "audit.jsonl"
    if not path.exists():
        return []
    lines = path.read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


#: How long an implementation's agent call takes in the cancelled run: far longer than
#: the run may take to stop once cancelled, so only stopping the attempt ends it in time.
STUCK_S = 300.0
#: How soon the cancelled run must have stopped, its attempts in flight stopped with it.
STOPS_WITHIN_S = 30.0


def slow_replay(replay: Path, latency_s: float = 1.5) -> None:
    """Implementations take a while, so that a cancel finds them in flight."""
    script_path = replay / "replay.yaml"
    script = yaml.safe_load(script_path.read_text(encoding="utf-8"))
    script["latency_s"] = {"code_author": latency_s, "integrator": latency_s}
    script_path.write_text(yaml.safe_dump(script), encoding="utf-8")


def in_flight(log: list[dict[str, object]]) -> set[tuple[object, object, object]]:
    flying: set[tuple[object, object, object]] = set()
    for e in log:
        key = (e.get("component_id"), e.get("phase"), e.get("attempt"))
        if e["type"] == "item_dispatched":
            flying.add(key)
        elif e["type"] in {"item_succeeded", "item_failed"}:
            flying.discard(key)
    return flying


def test_cancel_during_a_run_fences_its_attempts_and_resume_completes_it(
    example: Path, replay_copy: Path, tmp_path: Path
) -> None:
    # The cancelled run's implementations would wait STUCK_S; the resumed run's do not.
    fast = tmp_path / "fast-replay"
    shutil.copytree(replay_copy, fast)
    slow_replay(fast)
    slow_replay(replay_copy, STUCK_S)
    tree = tmp_path / "tree.json"
    shutil.copyfile(example / "tree.json", tree)
    project = tmp_path / "project"
    env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "200"}
    run = subprocess.Popen(
        [
            *(sys.executable, "-m", "scheduler.cli", "run", str(tree)),
            *("--project", str(project), "--replay-dir", str(replay_copy)),
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 120
        while not any(p == "implement" for _, p, _ in in_flight(events(project))):
            assert run.poll() is None and time.monotonic() < deadline, "no implementation ran"
            time.sleep(0.1)
        res = pact("cancel", str(project), "--by", "alice", "--reason", "wrong tree", "--json")
        assert res.returncode == 0, res.stderr
        answer = json.loads(res.stdout)
        assert answer["outcome"] == "cancelled" and answer["by"] == "alice"
        cancelled_at = time.monotonic()
        # The attempts in flight are stopped, so the run ends long before their STUCK_S.
        _, stderr = run.communicate(timeout=STOPS_WITHIN_S)
        assert time.monotonic() - cancelled_at < STOPS_WITHIN_S
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
    assert run.returncode == 1, stderr  # the run stopped paused, as cancelled

    log = events(project)
    at = next(i for i, e in enumerate(log) if e["type"] == "run_cancelled")
    cancelled = {tuple(k) for k in log[at]["items"]}  # type: ignore[arg-type]
    fenced = {(c, p) for c, p, _ in in_flight(log[:at])}
    assert fenced and fenced <= cancelled
    # Nothing of a fenced attempt was applied after the cancel.
    assert not [e for e in log[at + 1 :] if e["type"] in {"item_succeeded", "item_dispatched"}]
    status = json.loads(pact("status", str(project), "--json").stdout)
    assert status["status"] == "paused" and "cancelled by alice" in status["pause_reason"]

    res = pact("resume", str(project), "--replay-dir", str(fast))
    assert res.returncode == 0, res.stderr
    log = events(project)
    assert json.loads(pact("status", str(project), "--json").stdout)["status"] == "completed"
    for cid, phase in fenced:
        old = max(
            int(str(e["attempt"]))
            for e in log[:at]
            if (e.get("component_id"), e.get("phase")) == (cid, phase) and "attempt" in e
        )
        done = [
            e
            for e in log[at:]
            if e["type"] == "item_succeeded" and (e["component_id"], e["phase"]) == (cid, phase)
        ]
        assert done and int(str(done[0]["attempt"])) > old  # a new attempt, not the fenced one


def test_cancelling_a_run_no_process_drives_logs_it_at_once_and_names_bad_items(
    tmp_path: Path,
) -> None:
    builder = RunBuilder(tmp_path / "project", star_tree(2))
    builder.complete("c1")
    project = builder.close().root
    for name, word in (("ghost", "ghost"), ("c2/deploy", "deploy")):
        bad = pact("cancel", str(project), name)
        assert bad.returncode == 2 and word in bad.stderr
        assert not [e for e in events(project) if e["type"] == "run_cancelled"]
    res = pact("cancel", str(project), "c2", "--by", "bob", "--json")
    assert res.returncode == 0, res.stderr
    answer = json.loads(res.stdout)
    assert answer["outcome"] == "cancelled" and answer["whole_run"] is False
    assert sorted(tuple(k) for k in answer["items"]) == [
        ("c2", "contract"),
        ("c2", "implement"),
        ("c2", "test"),
    ]
    status = json.loads(pact("status", str(project), "--json").stdout)
    c2 = next(c for c in status["components"] if c["component_id"] == "c2")
    assert set(c2["phases"].values()) == {"cancelled"}
