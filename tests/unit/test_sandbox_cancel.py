"""Cancelling an attempt stops what it runs: a local command and its process tree, the
replay agent's wait, an attempt of the local executor (pact_workers.sandbox.cancel)."""

from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml

from pact_workers.agents.base import AgentRequest
from pact_workers.agents.replay import ReplayAgent
from pact_workers.models import EnvironmentSpec
from pact_workers.models.work import ROLE_FOR_PHASE, Phase
from pact_workers.sandbox import LocalSandbox, SandboxRequest
from pact_workers.sandbox.cancel import SandboxCancelled, cancellable

ENV = EnvironmentSpec(python_path=sys.executable, required_tools=[])
#: How long a cancelled attempt may take to stop (the sandboxes look every POLL_S).
PROMPT_S = 5.0


def set_later(event: threading.Event, after_s: float) -> threading.Timer:
    timer = threading.Timer(after_s, event.set)
    timer.start()
    return timer


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie waiting for its reaper counts as gone.
    stat = Path(f"/proc/{pid}/stat")
    return not (stat.exists() and stat.read_text().split(")")[-1].split()[0] == "Z")


def test_a_cancelled_local_command_is_killed_with_its_process_tree(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    # The command and a child of its own both sleep far past the test; both must go.
    code = (
        "import os, subprocess, sys, time\n"
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)'])\n"
        f"open({str(pids)!r}, 'w').write(f'{{os.getpid()}} {{child.pid}}')\n"
        "time.sleep(300)\n"
    )
    request = SandboxRequest(command=["{python}", "-c", code], environment=ENV, timeout_s=300)
    cancel = threading.Event()
    started = time.monotonic()
    with cancellable(cancel):
        timer = set_later(cancel, 1.5)
        with pytest.raises(SandboxCancelled, match="cancelled"):
            LocalSandbox().run(request)
        timer.join()
    assert time.monotonic() - started < 1.5 + PROMPT_S
    deadline = time.monotonic() + PROMPT_S
    command, child = (int(p) for p in pids.read_text().split())
    while alive(command) or alive(child):
        assert time.monotonic() < deadline, "the cancelled command's tree still runs"
        time.sleep(0.05)


def test_a_command_outside_a_cancelled_attempt_runs_to_its_end() -> None:
    cancel = threading.Event()
    cancel.set()  # another attempt's event: this command is not under it
    request = SandboxRequest(command=["{python}", "-c", "print('done')"], environment=ENV)
    result = LocalSandbox().run(request)
    assert result.exit_code == 0 and result.stdout.strip() == "done"


def test_the_replay_agent_stops_waiting_when_its_attempt_is_cancelled(tmp_path: Path) -> None:
    (tmp_path / "calc" / "src").mkdir(parents=True)
    (tmp_path / "calc" / "src" / "calc.py").write_text("X = 1\n")
    (tmp_path / "replay.yaml").write_text(yaml.safe_dump({"latency_s": {"code_author": 300}}))
    agent = ReplayAgent(tmp_path)
    request = AgentRequest(
        run_id="r",
        component_id="calc",
        phase=Phase.IMPLEMENT,
        role=ROLE_FOR_PHASE[Phase.IMPLEMENT],
        attempt=1,
    )
    cancel = threading.Event()
    started = time.monotonic()
    with cancellable(cancel):
        timer = set_later(cancel, 0.5)
        with pytest.raises(SandboxCancelled):
            agent.produce(request)
        timer.join()
    assert time.monotonic() - started < 0.5 + PROMPT_S
