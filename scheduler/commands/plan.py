"""``pact plan``: interview and decompose a task into Pact's interview.json and tree.json.

Everything a user gives is checked before a planning role is asked: the task file
(UTF-8 text, not empty, bounded), the project directory (one that can take a run and
holds no plan yet), the answers file's existence, the agent and its keys. The answers
file itself is validated against the interview once the interviewer has answered
(every error names the question id); nothing is written before the plan is whole.
The plan is written to ``DIR/decomposition/interview.json`` and
``DIR/decomposition/tree.json``; ``pact run DIR/decomposition/tree.json --project DIR``
(or ``pact plan ... --run``) continues from there.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from pact_workers.agents.factory import agent_options
from pact_workers.agents.llm import LLMBackend
from pact_workers.errors import InputError, RunDirError
from pact_workers.models.documents import read_input_file
from pact_workers.models.interview import InterviewerOutput
from pact_workers.models.work import Role
from scheduler.commands.fleet import check_executor
from scheduler.commands.rundir import check_new_project_dir
from scheduler.commands.runs import require_keys
from scheduler.interview import (
    AnswerLog,
    answers_from_approval,
    answers_from_file,
    answers_from_terminal,
)
from scheduler.planning import LLMPlanner, Plan, Planner, ReplayPlanner, make_plan
from scheduler.project import ProjectDir
from scheduler.settings import Settings, load_settings

__all__ = ["PlannedTask", "plan_paths", "plan_task"]

#: Largest task description read.
MAX_TASK_BYTES = 1024 * 1024
PLANNING_AGENTS = ("replay", "anthropic", "openai")


@dataclass(frozen=True)
class PlannedTask:
    plan: Plan
    interview_path: Path
    tree_path: Path


def plan_paths(project_dir: Path) -> tuple[Path, Path]:
    """Where a plan is written: ``DIR/decomposition/{interview,tree}.json``."""
    base = project_dir / "decomposition"
    return base / "interview.json", base / "tree.json"


def read_task(path: Path) -> str:
    """The task description.

    Raises:
        InputError: naming the file: missing, unreadable, not UTF-8 or empty.
    """
    try:
        text = read_input_file(path, MAX_TASK_BYTES).decode("utf-8")
    except UnicodeDecodeError:
        raise InputError(f"{path}: not UTF-8 text; the task must be a text file") from None
    except OSError as exc:
        raise InputError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    if not text.strip():
        raise InputError(f"{path}: the task is empty; describe what to build")
    return text


def make_planner(name: str, *, replay_dir: Path | None, settings: Settings) -> Planner:
    """The planner serving ``--agent name``.

    Raises:
        InputError: an agent that cannot plan, a replay directory without a plan, or
            a pact.yaml configuration a planning role cannot use.
    """
    if name not in PLANNING_AGENTS:
        raise InputError(
            f"--agent {name}: cannot interview or decompose; choose one of: "
            f"{', '.join(PLANNING_AGENTS)}"
        )
    if name == "replay":
        if replay_dir is None:
            raise InputError("the replay agent needs a replay directory (--replay-dir)")
        return ReplayPlanner(replay_dir)
    backends: list[LLMBackend] = []
    for role in (Role.INTERVIEWER, Role.DECOMPOSER):
        config = settings.agents.for_role(role, name)
        if config.backend == "anthropic":
            from pact_workers.agents.anthropic import AnthropicBackend

            backends.append(AnthropicBackend.from_config(config, prices=settings.prices))
        elif config.backend == "openai":
            from pact_workers.agents.openai import OpenAIBackend

            backends.append(OpenAIBackend.from_config(config, prices=settings.prices))
        else:
            raise InputError(
                f"pact.yaml agents.{role.value}: backend {config.backend!r} cannot plan; "
                "use anthropic or openai"
            )
    return LLMPlanner(backends[0], backends[1], name=name)


def plan_task(
    *,
    task_path: Path,
    project_dir: Path,
    answers_path: Path | None = None,
    approve: bool = False,
    agent_name: str = "replay",
    replay_dir: Path | None = None,
    ask: Callable[[str], str] | None = None,
    tell: Callable[[str], None] = lambda _message: None,
    on_interview: Callable[[InterviewerOutput], None] | None = None,
    executor_name: str = "local",
    broker_url: str | None = None,
    timeout_s: float = 900.0,
) -> PlannedTask:
    """Interview, answer and decompose the task at ``task_path``; write the plan.

    Answers come from ``answers_path``, else ``--approve``, else ``ask`` (a terminal
    prompt; ``tell`` explains an invalid answer). With ``executor_name`` ``celery`` the
    planning calls go to the fleet's workers through ``pact.interviewer`` and
    ``pact.decomposer`` (:class:`~scheduler.planning.fleet.FleetPlanner`).

    Raises:
        InputError: bad input (nothing was written).
        PlanningError: a planning role's answer could not be used (nothing written).
    """
    if answers_path is not None and approve:
        raise InputError("give either --answers FILE or --approve, not both")
    if timeout_s <= 0:
        raise InputError(f"--timeout must be above 0 seconds, got {timeout_s:g}")
    if answers_path is None and not approve and ask is None:
        raise InputError(
            "no way to answer the interview: give --answers FILE or --approve "
            "(the terminal prompt needs an interactive input)"
        )
    task = read_task(task_path)
    project = ProjectDir(project_dir)
    check_new_project_dir(project)
    interview_path, tree_path = plan_paths(project_dir)
    if tree_path.exists() or interview_path.exists():
        raise RunDirError(
            f"--project {project_dir}: already holds a plan ({tree_path.parent}); "
            "remove it or choose another directory"
        )
    if answers_path is not None and not answers_path.is_file():
        raise InputError(f"--answers {answers_path}: no such file")
    settings = load_settings(project.settings_path)
    broker = check_executor(executor_name, broker_url)
    if agent_name != "replay":
        require_keys(settings, agent_name, executor_name)
    # Built here as well on the fleet: its checks (a replay directory without a plan,
    # a backend that cannot plan) are bad input, found before anything is sent.
    planner: Planner = make_planner(agent_name, replay_dir=replay_dir, settings=settings)
    if broker is not None:
        # Celery loads only for a fleet plan (every other command starts without it).
        from scheduler.planning.fleet import FleetPlanner

        options = agent_options(
            agent_name,
            settings.agents,
            replay_dir=str(replay_dir.resolve()) if replay_dir is not None else None,
            prices=settings.prices,
        )
        planner = FleetPlanner(broker, agent=agent_name, agent_options=options, timeout_s=timeout_s)

    def answer(interview: InterviewerOutput) -> AnswerLog:
        if answers_path is not None:
            return answers_from_file(answers_path, interview)
        if approve:
            return answers_from_approval(interview)
        assert ask is not None
        return answers_from_terminal(interview, ask=ask, tell=tell)

    plan = make_plan(task, planner, answer=answer, approved=True, on_interview=on_interview)
    write_plan(plan, interview_path, tree_path)
    return PlannedTask(plan=plan, interview_path=interview_path, tree_path=tree_path)


def write_plan(plan: Plan, interview_path: Path, tree_path: Path) -> None:
    """Write both documents, each atomically (the tree last: it marks a whole plan)."""
    interview_path.parent.mkdir(parents=True, exist_ok=True)
    for path, doc in (
        (interview_path, plan.document.model_dump(mode="json")),
        (tree_path, plan.tree.model_dump(mode="json")),
    ):
        tmp = path.with_suffix(".json.tmp")
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump(doc, fh, indent=2)
            fh.write("\n")
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
