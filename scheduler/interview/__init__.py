"""Interview V2 (seed 000, section 3): typed questions, audited answers, matching.

The rules, in words:

- **Typed questions.** Every question has a type (free text by default, so Pact's
  plain questions stay valid): a boolean takes yes/no/true/false, an enum one of its
  options (at least two, compared without case), a numeric a number within its
  ordered range, free text anything not empty. A conditional question is asked only
  when the question it depends on was answered with the value it names.
- **Audited answers.** Every answer records its source (a person at the terminal,
  an answers file, an assumption matched by ``--approve``) and its confidence; a
  person's answer has confidence 1.0, a matched assumption names the assumption.
  Answers are append-only: a later answer to a question supersedes the earlier one
  for use, and both are kept. An answer less sure than 0.5 is a warning in ``pact
  status``.
- **Matching for --approve.** A strong keyword match (three or more significant
  words shared, stopwords never count) wins, then pairing by position (0.7), and
  otherwise "Accepted as stated" at 0.0: no assumption answers every question.
"""

from __future__ import annotations

from scheduler.interview.answers import (
    LOW_CONFIDENCE,
    AnswerLog,
    AnswerSource,
    AuditedAnswer,
    low_confidence_warnings,
)
from scheduler.interview.collect import (
    answers_from_approval,
    answers_from_file,
    answers_from_terminal,
)
from scheduler.interview.document import InterviewDocument, InterviewerOutput
from scheduler.interview.matching import match_answer_to_question, significant_words
from scheduler.interview.questions import (
    InterviewQuestion,
    QuestionType,
    is_skipped,
    validate_answer,
)

__all__ = [
    "LOW_CONFIDENCE",
    "AnswerLog",
    "AnswerSource",
    "AuditedAnswer",
    "InterviewDocument",
    "InterviewQuestion",
    "InterviewerOutput",
    "QuestionType",
    "answers_from_approval",
    "answers_from_file",
    "answers_from_terminal",
    "is_skipped",
    "low_confidence_warnings",
    "match_answer_to_question",
    "significant_words",
    "validate_answer",
]
