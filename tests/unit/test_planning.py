"""Planning: the interviewer's answer validated, the decomposer's tree sent back with
its error until it is valid."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pact_workers.agents.base import AgentRequest
from pact_workers.agents.roles import render_prompt
from pact_workers.errors import InputError
from pact_workers.models.interview import InterviewerOutput
from pact_workers.models.work import Phase, Role
from scheduler.commands.plan import plan_task
from scheduler.interview import answers_from_approval
from scheduler.planning import PlanAnswer, PlanningError, make_plan

GOOD_TREE = {
    "root_id": "app",
    "nodes": {
        "app": {"component_id": "app", "name": "App", "children": ["store"]},
        "store": {"component_id": "store", "name": "Store", "parent_id": "app"},
    },
}


class ScriptedPlanner:
    name = "scripted"

    def __init__(self, interview: Any, trees: list[Any]) -> None:
        self._interview = interview
        self.trees = trees
        self.feedback: list[list[str]] = []

    def interview(self, task: str) -> PlanAnswer:
        return PlanAnswer(data=self._interview)

    def decompose(
        self, task: str, interview: dict[str, Any], *, attempt: int, feedback: list[str]
    ) -> PlanAnswer:
        self.feedback.append(feedback)
        return PlanAnswer(data=self.trees[attempt - 1])


INTERVIEW = {"questions": [{"id": "q1", "text": "Persist?"}], "assumptions": ["In memory"]}


def test_an_invalid_tree_goes_back_with_its_error_as_feedback() -> None:
    bad = {
        "root_id": "app",
        "nodes": {"app": {"component_id": "app", "name": "App", "children": ["ghost"]}},
    }
    planner = ScriptedPlanner(INTERVIEW, [bad, GOOD_TREE])
    plan = make_plan("task", planner, answer=answers_from_approval, approved=True)
    assert plan.tree.root_id == "app"
    assert planner.feedback[0] == []
    assert len(planner.feedback[1]) == 1 and "ghost" in planner.feedback[1][0]
    assert plan.rejected == planner.feedback[1]


def test_no_valid_tree_after_every_attempt_fails_the_plan() -> None:
    planner = ScriptedPlanner(INTERVIEW, [{"nodes": 1}] * 3)
    with pytest.raises(PlanningError, match="no valid tree in 3 attempts"):
        make_plan("task", planner, answer=answers_from_approval, approved=True)


def test_an_invalid_interview_fails_the_plan_naming_the_field() -> None:
    broken = {"questions": [{"id": "q1", "text": "Pick", "question_type": "enum"}]}
    planner = ScriptedPlanner(broken, [GOOD_TREE])
    with pytest.raises(PlanningError, match="at least 2 options"):
        make_plan("task", planner, answer=answers_from_approval, approved=True)
    with pytest.raises(ValueError, match="depends on 'q9'"):
        InterviewerOutput.model_validate(
            {"questions": [{"id": "q1", "text": "t", "depends_on": "q9", "depends_value": "x"}]}
        )


def test_the_contract_author_prompt_shows_the_answered_interview() -> None:
    interview = {
        "questions": ["Persist to disk?"],
        "user_answers": {"Persist to disk?": "no"},
        "assumptions": ["Everything stays in memory"],
        "risks": ["Data is lost on exit"],
    }
    request = AgentRequest(
        run_id="r",
        component_id="store",
        phase=Phase.CONTRACT,
        role=Role.CONTRACT_AUTHOR,
        attempt=1,
        inputs={"interview": {"interview.json": json.dumps(interview).encode()}},
    )
    prompt = render_prompt(request).user
    assert "- Q: Persist to disk?\n  A: no" in prompt
    assert "### Assumptions\n- Everything stays in memory" in prompt
    assert "### Risks\n- Data is lost on exit" in prompt
    without = render_prompt(AgentRequest("r", "store", Phase.CONTRACT, Role.CONTRACT_AUTHOR, 1))
    assert "interview" not in without.user


def test_plan_task_refuses_bad_input_before_anything_is_written(
    example: Path, tmp_path: Path
) -> None:
    project = tmp_path / "project"
    empty = tmp_path / "empty.md"
    empty.write_text("  \n")
    replay = example / "replay"
    with pytest.raises(InputError, match="the task is empty"):
        plan_task(task_path=empty, project_dir=project, approve=True, replay_dir=replay)
    task = example / "task.md"
    with pytest.raises(InputError, match="cannot interview or decompose"):
        plan_task(task_path=task, project_dir=project, approve=True, agent_name="noop")
    answers = tmp_path / "answers.yaml"
    answers.write_text("- yes\n- no\n")
    with pytest.raises(InputError, match="expected a mapping of question ids"):
        plan_task(task_path=task, project_dir=project, answers_path=answers, replay_dir=replay)
    with pytest.raises(InputError, match="no way to answer"):
        plan_task(task_path=task, project_dir=project, replay_dir=replay)
    with pytest.raises(InputError, match="has no plan/ folder"):
        plan_task(task_path=task, project_dir=project, approve=True, replay_dir=tmp_path)
    assert not project.exists()
