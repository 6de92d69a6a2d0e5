"""How a plan is shown: each question with its answer, source and confidence, the
warnings about unsure answers, the trees sent back, and where the plan was written."""

from __future__ import annotations

from scheduler.cli.app import say
from scheduler.commands.plan import PlannedTask
from scheduler.interview import AnswerLog, low_confidence_warnings


def print_plan(planned: PlannedTask) -> None:
    """Print the answered interview and the plan's summary."""
    document = planned.plan.document
    current = AnswerLog(document.answer_log).current()
    for question in planned.plan.interview.questions:
        given = current.get(question.id)
        if given is None:
            say(f"{question.id}: {question.text} -> (not asked)")
            continue
        say(
            f"{question.id}: {question.text} -> {given.answer} "
            f"({given.source.value}, confidence {given.confidence:.2f})"
        )
    for warning in low_confidence_warnings(current.values()):
        say(warning, label="warning")
    for number, error in enumerate(planned.plan.rejected, start=1):
        say(f"the decomposer's tree {number} was sent back: {error}", label="note")
    tree = planned.plan.tree
    spent = sum(u.cost_usd for u in planned.plan.usage.values())
    say(
        f"plan: {len(tree.nodes)} components under {tree.root_id!r}; "
        f"{planned.interview_path} and {planned.tree_path} (planning cost ${spent:.4f})"
    )
