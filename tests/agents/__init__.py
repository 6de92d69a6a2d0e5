"""Test agents: real programs that act as coding agents, and what they need to run.

``fake_coding_agent.py`` is a command-line agent for the ``command`` backend; its
files (the script and its "knowledge", the bundled example's replay data) reach its
sandbox through the agent's ``files_dir``, laid out by :func:`stage_agent_files`.
"""

from __future__ import annotations

import shutil
from pathlib import Path

FAKE_AGENT = Path(__file__).resolve().parent / "fake_coding_agent.py"
#: Where the script and its knowledge sit inside the agent's workspace.
SCRIPT = "fake_coding_agent.py"
KNOWLEDGE = "knowledge"


def stage_agent_files(replay_dir: Path, dest: Path) -> Path:
    """Lay out a ``files_dir`` for the fake agent: the script and ``knowledge/``."""
    dest.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(FAKE_AGENT, dest / SCRIPT)
    shutil.copytree(replay_dir, dest / KNOWLEDGE, ignore=shutil.ignore_patterns("__pycache__"))
    return dest


def fake_agent_argv(python: str = "{python}", *, probe_network: bool = False) -> list[str]:
    """The argv template that runs the fake agent from its workspace."""
    argv = [
        python,
        SCRIPT,
        "--prompt",
        "{prompt_file}",
        "--workspace",
        "{workspace}",
        "--knowledge",
        KNOWLEDGE,
    ]
    return [*argv, "--probe-network"] if probe_network else argv
