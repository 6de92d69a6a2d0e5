"""The agent interface: given a role's inputs, produce that role's files.

What each role must produce (workspace-relative paths):

- contract_author: ``interface.json`` (a ComponentContract)
- test_author: ``tests/contract_test.py`` (and any other files under ``tests/``)
- code_author / integrator: the implementation under ``src/``
- any role, when ``request.teachback`` is set: ``teachback.json`` only
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from pact_workers.artifacts import Bundle
from pact_workers.models.work import FailureNote, Phase, Role, Usage


@dataclass(frozen=True)
class AgentRequest:
    """Everything an agent may see for one attempt (never the code author's tests)."""

    run_id: str
    component_id: str
    phase: Phase
    role: Role
    attempt: int
    inputs: Mapping[str, Bundle] = field(default_factory=dict)
    feedback: tuple[FailureNote, ...] = ()
    #: The files each failed attempt of ``feedback`` wrote, by attempt (when stored).
    previous_outputs: Mapping[int, Bundle] = field(default_factory=dict)
    #: The trace analyst's diagnosis of the last failure (when one is configured).
    diagnosis: str = ""
    #: Write only ``teachback.json`` (``pact_workers.models.teachback``): restate the
    #: task (what it will produce, every function and error case, the components it
    #: uses, what it assumes) before any work; the work call comes once it is approved.
    teachback: bool = False


@dataclass(frozen=True)
class AgentOutput:
    files: Bundle
    usage: Usage = field(default_factory=Usage)
    model: str = ""


@runtime_checkable
class Agent(Protocol):
    """A backend that writes one role's artifacts."""

    name: str

    def produce(self, request: AgentRequest) -> AgentOutput:
        """Raise TransientAgentError or PermanentAgentError when no output can be made."""
        ...
