"""Planning a task: the interview, its answers, then the decomposition (pure of I/O).

The interviewer's answer must be a valid :class:`InterviewerOutput` (typed questions,
unique ids, conditions naming questions of the same interview); one that is not
fails the plan, naming what is wrong. The answers come from whoever the caller
passes (terminal, file, approval). The decomposer's tree is validated as every
submitted tree is (:func:`~pact_workers.models.tree.tree_from_data`); an invalid
tree goes back to the decomposer with the error as feedback, up to ``max_attempts``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from pydantic import ValidationError

from pact_workers.errors import PactError, TreeError
from pact_workers.models.interview import InterviewerOutput
from pact_workers.models.tree import DecompositionTree, tree_from_data
from pact_workers.models.work import Usage
from scheduler.interview import AnswerLog, InterviewDocument
from scheduler.planning.planners import Planner

__all__ = ["DEFAULT_ATTEMPTS", "Plan", "PlanningError", "make_plan"]

DEFAULT_ATTEMPTS = 3


class PlanningError(PactError):
    """A planning role's answer could not be used (after its attempts)."""


@dataclass(frozen=True)
class Plan:
    """An answered interview and the tree decomposed from it."""

    interview: InterviewerOutput
    document: InterviewDocument
    tree: DecompositionTree
    #: Per role: what its calls cost.
    usage: dict[str, Usage] = field(default_factory=dict)
    #: The decomposer's rejected trees, one error each, oldest first.
    rejected: list[str] = field(default_factory=list)


def read_interview(data: object) -> InterviewerOutput:
    """The interviewer's answer, validated.

    Raises:
        PlanningError: naming every problem (field path and message).
    """
    try:
        return InterviewerOutput.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'interview'}: {e['msg']}"
            for e in exc.errors()[:10]
        )
        raise PlanningError(
            f"the interviewer's answer is not a valid interview: {problems}"
        ) from None


def make_plan(
    task: str,
    planner: Planner,
    *,
    answer: Callable[[InterviewerOutput], AnswerLog],
    approved: bool,
    max_attempts: int = DEFAULT_ATTEMPTS,
    on_interview: Callable[[InterviewerOutput], None] | None = None,
) -> Plan:
    """Interview, answer, decompose; see the module docstring.

    Raises:
        PlanningError: the interview is invalid, or no attempt gave a valid tree.
        InputError: from ``answer`` (an invalid answers file, say).
    """
    asked = planner.interview(task)
    interview = read_interview(asked.data)
    if on_interview is not None:
        on_interview(interview)
    answers = answer(interview)
    document = InterviewDocument.build(interview, answers, approved=approved)
    spent = Usage()
    rejected: list[str] = []
    for attempt in range(1, max_attempts + 1):
        proposed = planner.decompose(
            task, document.model_dump(mode="json"), attempt=attempt, feedback=list(rejected)
        )
        spent = spent + proposed.usage
        try:
            tree = tree_from_data(proposed.data, f"the decomposer's tree (attempt {attempt})")
        except TreeError as exc:
            rejected.append(str(exc))
            continue
        usage = {"interviewer": asked.usage, "decomposer": spent}
        return Plan(
            interview=interview,
            document=document.model_copy(update={"planning_usage": usage}),
            tree=tree,
            usage=usage,
            rejected=rejected,
        )
    raise PlanningError(
        f"the decomposer gave no valid tree in {max_attempts} attempts; the last: {rejected[-1]}"
    )
