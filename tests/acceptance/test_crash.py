"""Crash safety: ``pact run`` SIGKILLed at random moments, then ``pact resume``.

Each time the resumed run must complete, the final artifacts must be
byte-identical to an uninterrupted run's, and the audit log must show every
item applied exactly once.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from scheduler.audit import read_events
from scheduler.events import ItemDispatched, ItemSucceeded
from scheduler.project import ProjectDir
from scheduler.rebuild import read_state_json, rebuild_state
from scheduler.state import RunStatus
from tests.acceptance.test_cli import pact

KILLS = int(os.environ.get("PACT_CRASH_KILLS", "20"))
SEED = int(os.environ.get("PACT_CRASH_SEED", "20261122"))
SETTINGS = "backoff_base_s: 0.05\nbackoff_cap_s: 0.2\n"


def artifacts(root: Path) -> dict[str, bytes]:
    project = ProjectDir(root)
    out = {}
    for base in (project.contracts_dir, project.implementations_dir):
        for path in sorted(base.rglob("*")):
            # test_results.json carries the time of the run, and the provenance sidecars
            # (*.meta.json) its id, times and workers: records, not artifacts (checked by
            # sidecars_of).
            if path.is_file() and path.name != "test_results.json" and not is_sidecar(path):
                out[path.relative_to(root).as_posix()] = path.read_bytes()
    return out


def is_sidecar(path: Path) -> bool:
    return path.name.endswith(".meta.json")


def sidecars_of(root: Path) -> dict[str, str]:
    """Each provenance sidecar's path and the run id it names."""
    return {
        path.relative_to(root).as_posix(): json.loads(path.read_bytes())["run_id"]
        for path in sorted((root / ".pact").rglob("*.meta.json"))
    }


def run_args(example: Path, project: Path) -> list[str]:
    return [
        sys.executable,
        "-m",
        "scheduler.cli",
        "run",
        str(example / "tree.json"),
        "--project",
        str(project),
        "--replay-dir",
        str(example / "replay"),
        "--workers",
        "4",
    ]


def check_applied_once(root: Path) -> None:
    project = ProjectDir(root)
    events, warnings = read_events(project.audit_path)
    assert warnings == []
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    succeeded = Counter((e.component_id, e.phase) for e in events if isinstance(e, ItemSucceeded))
    state = rebuild_state(root)
    assert state.status is RunStatus.COMPLETED
    assert set(succeeded) == {(i.component_id, i.phase) for i in state.items.values()}
    assert set(succeeded.values()) == {1}, succeeded
    dispatched = Counter(
        (e.component_id, e.phase, e.attempt) for e in events if isinstance(e, ItemDispatched)
    )
    assert set(dispatched.values()) == {1}
    on_disk, _ = read_state_json(root)
    assert on_disk is not None and on_disk.model_dump() == state.model_dump()


def log_lines(root: Path) -> int:
    try:
        return (root / ".pact" / "audit.jsonl").read_bytes().count(b"\n")
    except FileNotFoundError:
        return 0


def wait_for_events(root: Path, proc: subprocess.Popen[bytes], count: int) -> None:
    """Until the run's audit log holds ``count`` events, or the run has ended."""
    deadline = time.monotonic() + 120
    while proc.poll() is None and time.monotonic() < deadline and log_lines(root) < count:
        time.sleep(0.002)


def already_completed(root: Path) -> bool:
    """Whether the audit log records a completed run (False for a torn or empty one)."""
    events, _ = read_events(ProjectDir(root).audit_path)
    return any(event.type == "run_completed" for event in events)


@pytest.mark.slow
def test_sigkill_at_random_moments_then_resume_completes_identically(
    tmp_path: Path, example: Path
) -> None:
    reference = tmp_path / "reference"
    reference.mkdir()
    (reference / "pact.yaml").write_text(SETTINGS)
    done = subprocess.Popen(
        run_args(example, reference), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    _, stderr = done.communicate(timeout=600)
    assert done.returncode == 0, stderr
    expected = artifacts(reference)
    assert len(expected) == 30
    # The kills aim at a random point of the run's progress, not of the wall clock: how
    # long a run takes depends on what else the machine is doing (a reference run slowed
    # by a neighbour made later kills land after the end).
    events = log_lines(reference)

    rng = random.Random(SEED)
    killed = 0
    for i in range(KILLS):
        root = tmp_path / f"crash{i}"
        root.mkdir()
        (root / "pact.yaml").write_text(SETTINGS)
        proc = subprocess.Popen(
            run_args(example, root), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        # After a random number of events, then a random moment within the next step.
        wait_for_events(root, proc, rng.randrange(1, events))
        time.sleep(rng.uniform(0.0, 0.02))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        if proc.returncode == -signal.SIGKILL and already_completed(root):
            # Killed after the run had completed (while it printed its summary or exited):
            # resume refuses, as for any completed run; the artifacts are checked below.
            resumed = pact("resume", str(root))
            assert resumed.returncode == 2 and "already complete" in resumed.stderr
        elif proc.returncode == -signal.SIGKILL:
            killed += 1
            resumed = pact("resume", str(root))
            assert resumed.returncode == 0, f"kill {i}: {resumed.stdout}\n{resumed.stderr}"
        else:
            assert proc.returncode == 0  # it finished before the signal landed
        assert artifacts(root) == expected, f"kill {i}: artifacts differ"
        # However the run was cut, every promoted item ends with its sidecar, of this run.
        run_id = rebuild_state(root).run_id
        wanted = {path: run_id for path in sidecars_of(reference)}
        assert sidecars_of(root) == wanted, f"kill {i}: sidecars differ"
        check_applied_once(root)
    assert killed >= KILLS * 3 // 4, f"only {killed} of {KILLS} runs were killed mid-run"
