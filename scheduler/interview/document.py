"""The interview as the interviewer returns it, and as Pact writes ``interview.json``.

The interviewer answers with typed questions, the assumptions it made, and the risks
and ambiguities it saw (:class:`InterviewerOutput`). Once answered, the interview is
written in Pact's own shape (``risks``, ``ambiguities``, ``questions`` as texts,
``assumptions``, ``user_answers`` by question text, ``approved``) so that Pact reads
it unchanged, plus two fields of ours: ``question_details`` (the typed questions) and
``answer_log`` (every answer with its source and confidence, superseded ones included)
and ``planning_usage`` (what the planning calls cost, which the run adds to its spend).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from pact_workers.models.interview import InterviewerOutput, InterviewQuestion
from pact_workers.models.work import Usage
from scheduler.interview.answers import AnswerLog, AuditedAnswer
from scheduler.interview.questions import is_skipped

__all__ = ["InterviewDocument", "InterviewerOutput"]


class InterviewDocument(BaseModel):
    """``decomposition/interview.json``: Pact's fields, then ours."""

    model_config = ConfigDict(extra="allow")

    risks: list[str] = Field(default_factory=list)
    ambiguities: list[str] = Field(default_factory=list)
    questions: list[str] = Field(default_factory=list)
    assumptions: list[str] = Field(default_factory=list)
    user_answers: dict[str, str] = Field(default_factory=dict)
    approved: bool = False
    question_details: list[InterviewQuestion] = Field(default_factory=list)
    answer_log: list[AuditedAnswer] = Field(default_factory=list)
    #: What the planning roles' calls cost, by role (``interviewer``, ``decomposer``).
    planning_usage: dict[str, Usage] = Field(default_factory=dict)

    @classmethod
    def build(
        cls, interview: InterviewerOutput, answers: AnswerLog, *, approved: bool
    ) -> InterviewDocument:
        """The answered interview: skipped conditional questions have no answer."""
        current = answers.current()
        texts = {q.id: q.text for q in interview.questions}
        return cls(
            risks=list(interview.risks),
            ambiguities=list(interview.ambiguities),
            questions=[q.text for q in interview.questions],
            assumptions=list(interview.assumptions),
            user_answers={texts[qid]: a.answer for qid, a in current.items() if qid in texts},
            approved=approved,
            question_details=list(interview.questions),
            answer_log=list(answers.history),
        )

    def skipped(self) -> list[str]:
        """Ids of the conditional questions this interview did not ask."""
        given = {a.question_id: a.answer for a in AnswerLog(self.answer_log).current().values()}
        return [q.id for q in self.question_details if is_skipped(q, given)]
