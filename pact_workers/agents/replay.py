"""The replay agent: serves pre-written artifacts from a directory.

Layout of a replay directory::

    replay.yaml                      # optional: usage per role, and a script
    <component>/interface.json       # served to the contract author
    <component>/tests/...            # served to the test author
    <component>/src/...              # served to the code author or integrator
    <component>/teachback.json       # served when a teachback is asked first
    <component>/audit.json           # served to the auditor

``replay.yaml`` may script, per component, phase and attempt, a different
outcome: ``{files: <dir>}`` serves that directory instead (relative to the
replay directory, laid out like a component directory), ``{teachback: <dir>}``
serves that directory's ``teachback.json`` when the attempt is a teachback,
``{transient: msg}`` and ``{permanent: msg}`` raise the matching agent error,
``{latency_s: x}`` sleeps first. It drives the demo and the end-to-end tests
deterministically.

Only what lies inside the replay directory is served: a file whose real path
leaves it (a symlink to a file of the host, a ``..`` in a component id) is a
:class:`PermanentAgentError` naming the file. A symlink to another file inside
the replay directory is served, as that file's contents: it lets attempts share
files without copies, and copies nothing from outside.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from pact_workers.agents.base import AgentOutput, AgentRequest
from pact_workers.errors import InputError, PermanentAgentError, TransientAgentError
from pact_workers.models.audit import AUDIT_FILE
from pact_workers.models.documents import (
    not_a_directory,
    parse_value_problem,
    validation_problems,
    yaml_position,
)
from pact_workers.models.teachback import TEACHBACK_FILE
from pact_workers.models.work import Phase, Role, Usage
from pact_workers.sandbox.base import safe_relpath
from pact_workers.sandbox.cancel import check_cancelled, pause


class ReplayStep(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    files: str | None = None
    teachback: str | None = None
    transient: str | None = None
    permanent: str | None = None
    latency_s: float = Field(default=0.0, ge=0)
    usage: Usage | None = None


class ReplayScript(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    usage: dict[str, Usage] = Field(default_factory=dict)
    latency_s: dict[str, float] = Field(default_factory=dict)
    script: dict[str, dict[Phase, dict[int, ReplayStep]]] = Field(default_factory=dict)


#: Where each phase's output lives inside a component directory.
PHASE_SOURCES: dict[Phase, str] = {
    Phase.CONTRACT: "interface.json",
    Phase.TEST: "tests",
    Phase.IMPLEMENT: "src",
    Phase.INTEGRATE: "src",
}


def load_replay_script(directory: Path) -> ReplayScript:
    path = directory / "replay.yaml"
    if not path.exists():
        return ReplayScript()
    try:
        data: Any = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        return ReplayScript.model_validate(data)
    except yaml.YAMLError as exc:
        raise InputError(f"{path}: cannot be parsed{yaml_position(exc)}") from exc
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: cannot be parsed: {exc}") from exc
    except ValidationError as exc:  # before ValueError, which it is
        raise InputError(f"{path}: {validation_problems(exc, 'replay.yaml')}") from None
    except ValueError as exc:  # a value YAML cannot convert: a giant number, a bad date
        raise InputError(f"{path}: cannot be parsed: {parse_value_problem(exc)}") from None


class ReplayAgent:
    """Serves each component's artifacts from ``directory``; see the module docstring."""

    name = "replay"

    def __init__(self, directory: Path | str) -> None:
        self.directory = Path(directory)
        if not self.directory.is_dir():
            raise InputError(
                f"replay directory {self.directory}: {not_a_directory(self.directory)}"
            )
        self.script = load_replay_script(self.directory)
        self.calls: list[AgentRequest] = []
        self._lock = threading.Lock()

    def produce(self, request: AgentRequest) -> AgentOutput:
        with self._lock:
            self.calls.append(request)
        step = (
            self.script.script.get(request.component_id, {})
            .get(request.phase, {})
            .get(request.attempt, ReplayStep())
        )
        delay = step.latency_s or self.script.latency_s.get(request.role.value, 0.0)
        if delay:
            # A cancelled attempt stops waiting at once (pact cancel frees its worker).
            pause(delay)
            check_cancelled("the agent call")
        if step.transient:
            raise TransientAgentError(step.transient)
        if step.permanent:
            raise PermanentAgentError(step.permanent)
        # A step's ``teachback`` serves that attempt's teachback; its ``files`` serve
        # the work (so one script serves a run whether or not teachbacks are asked).
        scripted = step.teachback if request.teachback else step.files
        base = (
            self.directory / safe_relpath(scripted)
            if scripted
            else (self.directory / request.component_id)
        )
        source = (
            TEACHBACK_FILE
            if request.teachback
            else AUDIT_FILE
            if request.role is Role.AUDITOR
            else PHASE_SOURCES[request.phase]
        )
        files = self._read(base, source)
        if not files:
            raise PermanentAgentError(
                f"replay directory has no {source} for component "
                f"{request.component_id!r} under {base}"
            )
        usage = step.usage or self.script.usage.get(request.role.value, Usage())
        return AgentOutput(files=files, usage=usage, model="replay")

    def _read(self, base: Path, name: str) -> dict[str, bytes]:
        source = base / name
        if source.is_file():
            paths = [source]
        elif source.is_dir():
            paths = [
                path
                for path in sorted(source.rglob("*"))
                if path.is_file() and "__pycache__" not in path.parts
            ]
        else:
            return {}
        root = self.directory.resolve()
        files: dict[str, bytes] = {}
        for path in paths:
            # Checked on the real path, before a byte is read: a symlink or ".." may
            # point at any file of the host, which must not end up in the run.
            if not path.resolve().is_relative_to(root):
                raise PermanentAgentError(
                    f"replay file {_shown(path, self.directory)} leaves the replay "
                    f"directory {self.directory}; serve only files inside it"
                )
            files[path.relative_to(base).as_posix()] = path.read_bytes()
        return files


def _shown(path: Path, directory: Path) -> str:
    """``path`` as written under the replay directory (not resolved), for messages."""
    try:
        return path.relative_to(directory).as_posix()
    except ValueError:
        return str(path)
