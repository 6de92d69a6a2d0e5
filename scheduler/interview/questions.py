"""Typed interview questions and the validation of one answer (seed 000, 3.1).

A question has a type (free text by default, so that Pact's plain string questions
stay valid); an enum question needs at least two options and a numeric range is
ordered, both checked when the question is built. A conditional question
(``depends_on``) is asked only when its parent question was answered with
``depends_value``.
"""

from __future__ import annotations

from collections.abc import Mapping

from pact_workers.models.interview import InterviewQuestion, QuestionType

__all__ = [
    "BOOLEAN_ANSWERS",
    "InterviewQuestion",
    "QuestionType",
    "is_skipped",
    "normalise_answer",
    "validate_answer",
]

#: The answers a boolean question accepts, and what each means.
BOOLEAN_ANSWERS: dict[str, bool] = {"yes": True, "no": False, "true": True, "false": False}


def validate_answer(question: InterviewQuestion, answer: str) -> str | None:
    """Validate an answer against question type constraints.

    Returns None if valid, error message if invalid.

    Rules:
    - BOOLEAN: answer in ("yes", "no", "true", "false")
    - ENUM: answer in question.options (case-insensitive)
    - NUMERIC: parseable as float, range_min <= value <= range_max
    - FREETEXT: non-empty string
    """
    text = answer.strip()
    kind = question.question_type
    if kind is QuestionType.BOOLEAN:
        if text.lower() in BOOLEAN_ANSWERS:
            return None
        return f"{answer!r} is not a yes/no answer (give yes, no, true or false)"
    if kind is QuestionType.ENUM:
        if text.lower() in {option.lower() for option in question.options}:
            return None
        return f"{answer!r} is not one of the options: {', '.join(question.options)}"
    if kind is QuestionType.NUMERIC:
        try:
            value = float(text)
        except ValueError:
            return f"{answer!r} is not a number"
        if value != value:  # NaN compares false with every bound
            return f"{answer!r} is not a number"
        if question.range_min is not None and value < question.range_min:
            return f"{text} is below the minimum {question.range_min:g}"
        if question.range_max is not None and value > question.range_max:
            return f"{text} is above the maximum {question.range_max:g}"
        return None
    if not text:
        return "the answer is empty"
    return None


def normalise_answer(question: InterviewQuestion, answer: str) -> str:
    """A valid answer in its canonical spelling (``Yes`` -> ``yes``, an enum option as
    the question writes it), so that conditions compare what was meant."""
    text = answer.strip()
    if question.question_type is QuestionType.BOOLEAN:
        return "yes" if BOOLEAN_ANSWERS[text.lower()] else "no"
    if question.question_type is QuestionType.ENUM:
        return next(o for o in question.options if o.lower() == text.lower())
    return text


def is_skipped(question: InterviewQuestion, answers: Mapping[str, str]) -> bool:
    """True when ``question`` is conditional and its parent's answer does not match.

    A parent not answered (itself skipped) skips its dependents too. Booleans compare
    by meaning (``true`` matches ``yes``), anything else case-insensitively.
    """
    if question.depends_on is None or question.depends_value is None:
        return False
    given = answers.get(question.depends_on)
    if given is None:
        return True
    return _differs(given, question.depends_value)


def _differs(given: str, wanted: str) -> bool:
    a, b = given.strip().lower(), wanted.strip().lower()
    if a in BOOLEAN_ANSWERS and b in BOOLEAN_ANSWERS:
        return BOOLEAN_ANSWERS[a] is not BOOLEAN_ANSWERS[b]
    return a != b
