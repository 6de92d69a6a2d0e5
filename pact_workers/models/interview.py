"""The interviewer's answer (seed 000, 3.1): typed questions, assumptions, risks.

Shared by the planning roles' agents and the scheduler. A question has a type (free
text by default, so that Pact's plain string questions stay valid); an enum question
needs at least two options and a numeric range is ordered, both checked when the
question is built; ``depends_on`` and ``depends_value`` go together. Question ids
are unique within an interview and a condition names a question of the same interview.
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = ["InterviewQuestion", "InterviewerOutput", "QuestionType"]


class QuestionType(StrEnum):
    FREETEXT = "freetext"
    BOOLEAN = "boolean"
    ENUM = "enum"
    NUMERIC = "numeric"


class InterviewQuestion(BaseModel):
    """A typed interview question with validation."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str = Field(min_length=1, description="Unique question identifier, e.g. q_001")
    text: str = Field(min_length=1, description="The question text")
    question_type: QuestionType = QuestionType.FREETEXT
    options: list[str] = Field(default_factory=list, description="Valid options for enum type")
    default: str = Field(default="", description="Default answer if auto-approved")
    range_min: float | None = Field(default=None, description="Min value for numeric type")
    range_max: float | None = Field(default=None, description="Max value for numeric type")
    depends_on: str | None = Field(default=None, description="Question ID this depends on")
    depends_value: str | None = Field(
        default=None, description="Required answer on depends_on to show this question"
    )

    @model_validator(mode="after")
    def _consistent(self) -> InterviewQuestion:
        if self.question_type is QuestionType.ENUM and len(self.options) < 2:
            raise ValueError(
                f"question {self.id!r}: an enum question needs at least 2 options, "
                f"got {len(self.options)}"
            )
        if (
            self.range_min is not None
            and self.range_max is not None
            and self.range_min > self.range_max
        ):
            raise ValueError(
                f"question {self.id!r}: range_min {self.range_min:g} is above "
                f"range_max {self.range_max:g}"
            )
        if (self.depends_on is None) != (self.depends_value is None):
            raise ValueError(f"question {self.id!r}: depends_on and depends_value go together")
        if self.depends_on == self.id:
            raise ValueError(f"question {self.id!r} depends on itself")
        return self


class InterviewerOutput(BaseModel):
    """What the interviewer role returns."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    questions: list[InterviewQuestion] = Field(default_factory=list)
    assumptions: list[str] = Field(default_factory=list)
    risks: list[str] = Field(default_factory=list)
    ambiguities: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _ids(self) -> InterviewerOutput:
        seen: set[str] = set()
        for question in self.questions:
            if question.id in seen:
                raise ValueError(f"question id {question.id!r} is used twice")
            seen.add(question.id)
        for question in self.questions:
            if question.depends_on is not None and question.depends_on not in seen:
                raise ValueError(
                    f"question {question.id!r} depends on {question.depends_on!r}, "
                    "which is not a question of this interview"
                )
        return self

    def question(self, question_id: str) -> InterviewQuestion | None:
        return next((q for q in self.questions if q.id == question_id), None)
