"""Where answers come from: a person at the terminal, a YAML answers file, ``--approve``.

Each way validates every answer by its question's type before it is kept and
skips conditional questions whose parent answer does not match:

- the terminal asks again after an invalid answer (an empty answer takes the
  question's default, when it has one);
- an answers file (``question id: answer``) is refused as a whole on the first
  problem, with a message naming the file and the question id;
- ``--approve`` answers from the interviewer's assumptions
  (:func:`~scheduler.interview.matching.match_answer_to_question`), recording the
  assumption matched and its confidence; a typed question takes its default instead
  of an assumption's prose, and one without a valid default cannot be approved.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from pact_workers.errors import InputError
from pact_workers.models.documents import (
    load_yaml,
    parse_value_problem,
    read_input_file,
    yaml_position,
)
from scheduler.interview.answers import AnswerLog, AnswerSource, AuditedAnswer
from scheduler.interview.document import InterviewerOutput
from scheduler.interview.matching import ACCEPTED_AS_STATED, match_answer_to_question
from scheduler.interview.questions import (
    InterviewQuestion,
    QuestionType,
    is_skipped,
    normalise_answer,
    validate_answer,
)

__all__ = ["answers_from_approval", "answers_from_file", "answers_from_terminal"]

#: Largest answers file read.
MAX_ANSWERS_BYTES = 1024 * 1024


def answers_from_file(path: Path, interview: InterviewerOutput) -> AnswerLog:
    """The answers of a YAML file mapping question ids to answers.

    Raises:
        InputError: the file cannot be read or is not such a mapping, an id is no
            question of the interview, an answer is invalid for its question's type,
            or a question that is asked has neither an answer nor a default.
    """
    try:
        doc: Any = load_yaml(read_input_file(path, MAX_ANSWERS_BYTES).decode("utf-8"))
    except UnicodeDecodeError:
        raise InputError(f"{path}: not UTF-8 text") from None
    except yaml.YAMLError as exc:
        raise InputError(f"{path}: invalid YAML{yaml_position(exc)}") from None
    except ValueError as exc:  # a value YAML cannot convert: a giant number, a bad date
        raise InputError(f"{path}: invalid YAML: {parse_value_problem(exc)}") from None
    except OSError as exc:
        raise InputError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    if doc is None:
        doc = {}
    if not isinstance(doc, dict):
        raise InputError(
            f"{path}: expected a mapping of question ids to answers, got {type(doc).__name__}"
        )
    known = {q.id for q in interview.questions}
    for key in doc:
        if str(key) not in known:
            raise InputError(
                f"{path}: {key!r} is not a question of this interview "
                f"(its questions: {', '.join(sorted(known)) or 'none'})"
            )
    given = {str(k): _scalar(path, str(k), v) for k, v in doc.items()}
    log = AnswerLog()
    answered: dict[str, str] = {}
    for question in interview.questions:
        if is_skipped(question, answered):
            if question.id in given:
                raise InputError(
                    f"{path}: question {question.id} is not asked ({question.depends_on} "
                    f"is not {question.depends_value!r}); remove its answer"
                )
            continue
        answer = given.get(question.id)
        if answer is None:
            if not question.default:
                raise InputError(
                    f"{path}: question {question.id} has no answer and no default: {question.text}"
                )
            answer = question.default
        problem = validate_answer(question, answer)
        if problem is not None:
            raise InputError(f"{path}: question {question.id}: {problem}")
        answered[question.id] = normalise_answer(question, answer)
        log.add(
            AuditedAnswer(
                question_id=question.id,
                answer=answered[question.id],
                source=AnswerSource.ANSWERS_FILE,
                confidence=1.0,
            )
        )
    return log


def _scalar(path: Path, question_id: str, value: object) -> str:
    """A YAML answer as text: YAML reads ``yes`` as a boolean and ``42`` as a number."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int | float | str):
        return str(value)
    if value is None:
        return ""
    raise InputError(
        f"{path}: question {question_id}: the answer must be one value, not a "
        f"{type(value).__name__}"
    )


def answers_from_terminal(
    interview: InterviewerOutput,
    *,
    ask: Callable[[str], str],
    tell: Callable[[str], None],
) -> AnswerLog:
    """Ask each question on the terminal (``ask`` prompts and returns the line typed);
    an invalid answer is explained with ``tell`` and the question asked again.

    Raises:
        InputError: the input ended (EOF) before every question was answered.
    """
    log = AnswerLog()
    answered: dict[str, str] = {}
    for question in interview.questions:
        if is_skipped(question, answered):
            continue
        while True:
            try:
                typed = ask(_prompt(question))
            except EOFError:
                raise InputError(
                    f"the input ended before question {question.id} was answered; answer "
                    "every question, or give --answers FILE or --approve"
                ) from None
            answer = typed.strip() or question.default
            problem = validate_answer(question, answer)
            if problem is None:
                break
            tell(f"{question.id}: {problem}")
        answered[question.id] = normalise_answer(question, answer)
        log.add(
            AuditedAnswer(
                question_id=question.id,
                answer=answered[question.id],
                source=AnswerSource.USER_INTERACTIVE,
                confidence=1.0,
            )
        )
    return log


def _prompt(question: InterviewQuestion) -> str:
    hint = {
        QuestionType.BOOLEAN: " [yes/no]",
        QuestionType.ENUM: f" [{'/'.join(question.options)}]",
        QuestionType.NUMERIC: _range_hint(question),
        QuestionType.FREETEXT: "",
    }[question.question_type]
    default = f" (default: {question.default})" if question.default else ""
    return f"{question.id}: {question.text}{hint}{default}\n> "


def _range_hint(question: InterviewQuestion) -> str:
    low = "" if question.range_min is None else f"{question.range_min:g}"
    high = "" if question.range_max is None else f"{question.range_max:g}"
    return f" [number {low}..{high}]" if low or high else " [number]"


def answers_from_approval(interview: InterviewerOutput) -> AnswerLog:
    """Approve the interviewer's assumptions as the answers (``--approve``).

    Raises:
        InputError: a typed question matched no valid answer and has no valid default.
    """
    log = AnswerLog()
    answered: dict[str, str] = {}
    taken: dict[str, str] = {}
    for index, question in enumerate(interview.questions):
        if is_skipped(question, answered):
            continue
        text, confidence = match_answer_to_question(
            question.text, list(interview.assumptions), taken, index=index
        )
        matched = None if text == ACCEPTED_AS_STATED else text
        if matched is not None:
            taken[question.id] = matched
        answer = text
        if question.question_type is not QuestionType.FREETEXT:
            # An assumption is prose; a typed question takes its default.
            answer = question.default
            if validate_answer(question, answer) is not None:
                raise InputError(
                    f"question {question.id} ({question.question_type.value}) cannot be "
                    "approved: it has no valid default; answer it with --answers FILE or "
                    "at the terminal"
                )
        elif matched is None and question.default:
            answer = question.default
        answered[question.id] = normalise_answer(question, answer)
        log.add(
            AuditedAnswer(
                question_id=question.id,
                answer=answered[question.id],
                source=AnswerSource.AUTO_ASSUMPTION if matched else AnswerSource.CLI_APPROVE,
                confidence=confidence,
                matched_assumption=matched,
            )
        )
    return log
