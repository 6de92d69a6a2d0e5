"""Who answers the two planning roles: the interviewer and the decomposer.

A planner is one small Protocol with two calls, and siblings implement it (the fleet's,
which sends each call to a worker, is ``scheduler.planning.fleet``):

- :class:`ReplayPlanner` serves recorded answers from a replay directory's ``plan/``
  folder (``interview.json``; ``tree.json``, or ``tree-<attempt>.json`` for a given
  attempt), with the usage ``replay.yaml`` gives the ``interviewer`` and
  ``decomposer`` roles. It makes ``pact plan`` on the bundled example run offline.
- :class:`LLMPlanner` asks a language model through the same backends the other roles
  use (``anthropic``, ``openai``), configured per role in ``pact.yaml``
  (``agents.interviewer``, ``agents.decomposer``), with a versioned prompt and the
  answer's JSON schema.

A planner returns what it was given back, parsed only as JSON; validating it (typed
questions, the tree) is the caller's job, so that every planner's answer is judged by
the same rules.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field

from pact_workers.agents.replay import load_replay_script
from pact_workers.errors import InputError, PermanentAgentError
from pact_workers.models.work import Role, Usage

if TYPE_CHECKING:
    from pact_workers.agents.llm import LLMBackend

__all__ = [
    "LLMPlanner",
    "PlanAnswer",
    "PlanCall",
    "Planner",
    "ReplayPlanner",
    "answer_call",
    "planner_from_options",
]

#: Where a replay directory keeps the planning roles' answers.
PLAN_DIR = "plan"
PROMPT_VERSION = "v1"


@dataclass(frozen=True)
class PlanAnswer:
    """One planning call's answer (a JSON document) and what it cost."""

    data: Any
    usage: Usage = field(default_factory=Usage)


class Planner(Protocol):
    name: str

    def interview(self, task: str) -> PlanAnswer:
        """The interviewer's answer to ``task``: questions, assumptions, risks, ambiguities."""
        ...

    def decompose(
        self, task: str, interview: dict[str, Any], *, attempt: int, feedback: list[str]
    ) -> PlanAnswer:
        """The decomposer's tree for ``task`` and the answered ``interview``; ``feedback``
        lists what was wrong with the previous attempt's tree."""
        ...


class ReplayPlanner:
    """Recorded planning answers; see the module docstring."""

    name = "replay"

    def __init__(self, directory: Path) -> None:
        self.directory = directory / PLAN_DIR
        if not self.directory.is_dir():
            raise InputError(
                f"replay directory {directory} has no {PLAN_DIR}/ folder: the replay agent "
                f"serves the interviewer and decomposer from {PLAN_DIR}/interview.json and "
                f"{PLAN_DIR}/tree.json"
            )
        self.usage = load_replay_script(directory).usage
        self.calls: list[str] = []

    def interview(self, task: str) -> PlanAnswer:
        self.calls.append("interviewer")
        data = self._read("interview.json")
        return PlanAnswer(data=data, usage=self.usage.get("interviewer", Usage()))

    def decompose(
        self, task: str, interview: dict[str, Any], *, attempt: int, feedback: list[str]
    ) -> PlanAnswer:
        self.calls.append("decomposer")
        name = f"tree-{attempt}.json"
        data = self._read(name if (self.directory / name).is_file() else "tree.json")
        return PlanAnswer(data=data, usage=self.usage.get("decomposer", Usage()))

    def _read(self, name: str) -> Any:
        path = self.directory / name
        if not path.resolve().is_relative_to(self.directory.resolve()):
            raise PermanentAgentError(f"replay file {path} leaves the replay directory")
        try:
            return json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise PermanentAgentError(f"the replay directory has no {path}") from None
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise PermanentAgentError(f"{path}: not a JSON document: {exc}") from None


def planning_prompt(role: Role) -> str:
    """The planning role's instructions (``pact_workers/agents/prompts/<role>.v1.md``)."""
    ref = resources.files("pact_workers.agents") / "prompts" / f"{role.value}.{PROMPT_VERSION}.md"
    return ref.read_text(encoding="utf-8")


class LLMPlanner:
    """The planning roles answered by a language model; see the module docstring."""

    def __init__(self, interviewer: LLMBackend, decomposer: LLMBackend, *, name: str) -> None:
        self.interviewer = interviewer
        self.decomposer = decomposer
        self.name = name

    def interview(self, task: str) -> PlanAnswer:
        from pact_workers.agents.roles import Prompt
        from pact_workers.models.interview import InterviewerOutput

        prompt = Prompt(
            system=planning_prompt(Role.INTERVIEWER),
            user=f"# Task\n\n{task}",
            version=PROMPT_VERSION,
        )
        schema = InterviewerOutput.model_json_schema()
        done = self.interviewer.complete(prompt, role=Role.INTERVIEWER, schema=schema)
        return PlanAnswer(data=done.data, usage=done.usage)

    def decompose(
        self, task: str, interview: dict[str, Any], *, attempt: int, feedback: list[str]
    ) -> PlanAnswer:
        from pact_workers.agents.roles import Prompt
        from pact_workers.models.tree import DecompositionTree

        sections = [
            f"# Task\n\n{task}",
            "# The interview, answered\n\n" + json.dumps(interview, indent=2),
        ]
        if feedback:
            sections.append(
                "# Your previous tree was rejected\n\n" + "\n".join(f"- {f}" for f in feedback)
            )
        prompt = Prompt(
            system=planning_prompt(Role.DECOMPOSER),
            user="\n\n".join(sections),
            version=PROMPT_VERSION,
        )
        schema = DecompositionTree.model_json_schema()
        done = self.decomposer.complete(prompt, role=Role.DECOMPOSER, schema=schema)
        return PlanAnswer(data=done.data, usage=done.usage)


def planner_from_options(name: str, options: dict[str, str]) -> Planner:
    """The planner of agent ``name`` with the options a run records for it
    (:func:`pact_workers.agents.factory.agent_options`; never secrets).

    Raises:
        InputError: an agent that cannot plan, or options that do not say how.
    """
    if name == "replay":
        if "replay_dir" not in options:
            raise InputError("the replay agent needs a replay directory (--replay-dir)")
        return ReplayPlanner(Path(options["replay_dir"]))
    if name not in ("anthropic", "openai"):
        raise InputError(f"agent {name!r} cannot interview or decompose")
    from pydantic import ValidationError

    from pact_workers.agents.config import AgentConfig
    from pact_workers.agents.pricing import Price

    try:
        roles = json.loads(options.get("roles", "{}"))
        prices = {
            model: Price.model_validate(price)
            for model, price in json.loads(options.get("prices", "{}")).items()
        }
        configs = [
            AgentConfig.model_validate(roles[role.value])
            for role in (Role.INTERVIEWER, Role.DECOMPOSER)
        ]
    except (ValueError, KeyError, ValidationError) as exc:
        raise InputError(f"agent options for {name!r} cannot plan: {exc}") from exc
    backends: list[LLMBackend] = []
    for config in configs:
        if config.backend == "anthropic":
            from pact_workers.agents.anthropic import AnthropicBackend

            backends.append(AnthropicBackend.from_config(config, prices=prices))
        elif config.backend == "openai":
            from pact_workers.agents.openai import OpenAIBackend

            backends.append(OpenAIBackend.from_config(config, prices=prices))
        else:
            raise InputError(f"backend {config.backend!r} cannot plan; use anthropic or openai")
    return LLMPlanner(backends[0], backends[1], name=name)


class PlanCall(BaseModel):
    """One planning call sent to a worker (``pact plan --executor celery``)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    plan_id: str = Field(min_length=1, max_length=64)
    role: Literal["interviewer", "decomposer"]
    task: str
    interview: dict[str, Any] = Field(default_factory=dict)
    attempt: int = Field(default=1, ge=1)
    feedback: list[str] = Field(default_factory=list)
    agent: str
    agent_options: dict[str, str] = Field(default_factory=dict)


def answer_call(planner: Planner, call: PlanCall) -> PlanAnswer:
    """Ask ``planner`` what ``call`` asks."""
    if call.role == "interviewer":
        return planner.interview(call.task)
    return planner.decompose(
        call.task, call.interview, attempt=call.attempt, feedback=list(call.feedback)
    )
