"""Answers with their provenance, kept append-only (seed 000, 3.2).

Every answer says where it came from (a person at the terminal, an answers file,
an assumption matched by ``--approve``) and how sure that source is. A later answer
to the same question supersedes the earlier one for use, and both are kept.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = [
    "LOW_CONFIDENCE",
    "AnswerLog",
    "AnswerSource",
    "AuditedAnswer",
    "low_confidence_warnings",
]

#: Answers less sure than this are shown as warnings by ``pact status``.
LOW_CONFIDENCE = 0.5


class AnswerSource(StrEnum):
    USER_INTERACTIVE = "user_interactive"  # Human typed it
    AUTO_ASSUMPTION = "auto_assumption"  # Matched from assumptions
    INTEGRATION_SLACK = "integration_slack"
    INTEGRATION_LINEAR = "integration_linear"
    CLI_APPROVE = "cli_approve"  # pact approve (bulk)
    #: Given in a YAML answers file (``pact plan --answers``): a person wrote it.
    ANSWERS_FILE = "answers_file"


#: Sources where a person gave the answer: their confidence is always 1.0.
HUMAN_SOURCES = frozenset({AnswerSource.USER_INTERACTIVE, AnswerSource.ANSWERS_FILE})


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


class AuditedAnswer(BaseModel):
    """An answer with full provenance."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    question_id: str = Field(min_length=1)
    answer: str
    source: AnswerSource
    confidence: float = Field(
        default=1.0, ge=0.0, le=1.0, description="Match confidence for auto-filled"
    )
    timestamp: str = Field(default_factory=_now, description="ISO 8601 timestamp")
    matched_assumption: str | None = Field(
        default=None, description="Which assumption was matched, if any"
    )

    @model_validator(mode="after")
    def _provenance(self) -> AuditedAnswer:
        if self.source in HUMAN_SOURCES and self.confidence != 1.0:
            raise ValueError(
                f"answer to {self.question_id!r}: a {self.source.value} answer has "
                f"confidence 1.0, not {self.confidence}"
            )
        if self.source is AnswerSource.AUTO_ASSUMPTION and self.matched_assumption is None:
            raise ValueError(
                f"answer to {self.question_id!r}: an auto_assumption answer names the "
                "assumption it matched"
            )
        return self

    @property
    def low_confidence(self) -> bool:
        return self.confidence < LOW_CONFIDENCE


class AnswerLog:
    """Every answer given, in order; the latest per question is the one used."""

    def __init__(self, answers: Iterable[AuditedAnswer] = ()) -> None:
        self._history: list[AuditedAnswer] = list(answers)

    def add(self, answer: AuditedAnswer) -> None:
        """Append ``answer``; an earlier answer to its question stays in the history."""
        self._history.append(answer)

    @property
    def history(self) -> tuple[AuditedAnswer, ...]:
        return tuple(self._history)

    def current(self) -> dict[str, AuditedAnswer]:
        """The answer in use for each question: its latest."""
        latest: dict[str, AuditedAnswer] = {}
        for answer in self._history:
            latest[answer.question_id] = answer
        return latest

    def __iter__(self) -> Iterator[AuditedAnswer]:
        return iter(self.current().values())

    def __len__(self) -> int:
        return len(self.current())


def low_confidence_warnings(answers: Iterable[AuditedAnswer]) -> list[str]:
    """One warning per answer in use whose confidence is below :data:`LOW_CONFIDENCE`."""
    return [
        f"interview answer to {a.question_id} has low confidence {a.confidence:.2f} "
        f"({a.source.value}): {a.answer!r}; check it"
        for a in answers
        if a.low_confidence
    ]
