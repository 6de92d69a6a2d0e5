"""Planning (``pact plan``): from a task description to Pact's interview and tree.

The rules, in words:

- Two roles plan, before any component exists: the **interviewer** reads the task and
  returns typed questions, the assumptions it would make, risks and ambiguities; the
  **decomposer** turns the task and the answered interview into a decomposition tree.
  They are served by the same agent backends as the other roles (replay, anthropic,
  openai), configured per role in ``pact.yaml``.
- Answers come from a person at the terminal, from a YAML answers file, or from
  ``--approve`` (the assumptions, matched to questions by
  :func:`scheduler.interview.match_answer_to_question`); each is validated by its
  question's type and recorded with its source and confidence.
- The decomposer's tree is validated like any submitted tree; an invalid one goes back
  with the error as feedback, a bounded number of times.
- The result is Pact's own ``decomposition/interview.json`` and
  ``decomposition/tree.json``, which ``pact run`` starts from; the run logs the
  interview and shows it to the contract authors.
"""

from __future__ import annotations

from scheduler.planning.plan import DEFAULT_ATTEMPTS, Plan, PlanningError, make_plan
from scheduler.planning.planners import LLMPlanner, PlanAnswer, Planner, ReplayPlanner

__all__ = [
    "DEFAULT_ATTEMPTS",
    "LLMPlanner",
    "Plan",
    "PlanAnswer",
    "Planner",
    "PlanningError",
    "ReplayPlanner",
    "make_plan",
]
