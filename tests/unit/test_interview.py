"""Interview V2 (seed 000, section 3): typed questions, audited answers, matching.

The test names of seed 000's "Test criteria" are kept as written.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from pact_workers.errors import InputError
from scheduler.interview import (
    AnswerLog,
    AnswerSource,
    AuditedAnswer,
    InterviewerOutput,
    InterviewQuestion,
    QuestionType,
    answers_from_approval,
    answers_from_file,
    answers_from_terminal,
    is_skipped,
    low_confidence_warnings,
    match_answer_to_question,
    validate_answer,
)

BOOL = InterviewQuestion(id="q1", text="Persist to disk?", question_type=QuestionType.BOOLEAN)
ENUM = InterviewQuestion(
    id="q2", text="Which store?", question_type=QuestionType.ENUM, options=["sqlite", "Redis"]
)
NUM = InterviewQuestion(
    id="q3", text="Max items?", question_type=QuestionType.NUMERIC, range_min=0, range_max=100
)


# -- 3.1 structured question types ------------------------------------------------


def test_boolean_accepts_yes_no() -> None:
    for answer in ("yes", "no", "true", "false", "YES", " No "):
        assert validate_answer(BOOL, answer) is None


def test_boolean_rejects_maybe() -> None:
    error = validate_answer(BOOL, "maybe")
    assert error is not None and "maybe" in error


def test_enum_accepts_valid_option() -> None:
    assert validate_answer(ENUM, "sqlite") is None
    assert validate_answer(ENUM, "redis") is None  # case-insensitive


def test_enum_rejects_invalid() -> None:
    error = validate_answer(ENUM, "postgres")
    assert error is not None and "sqlite" in error


def test_numeric_in_range() -> None:
    assert validate_answer(NUM, "42") is None
    assert validate_answer(NUM, "0") is None and validate_answer(NUM, "100") is None


def test_numeric_out_of_range() -> None:
    assert validate_answer(NUM, "200") is not None
    assert validate_answer(NUM, "-1") is not None
    assert validate_answer(NUM, "forty") is not None
    assert validate_answer(NUM, "nan") is not None


def test_conditional_skip() -> None:
    follow = InterviewQuestion(id="q4", text="Where?", depends_on="q1", depends_value="yes")
    assert is_skipped(follow, {"q1": "no"})
    assert not is_skipped(follow, {"q1": "yes"})
    assert not is_skipped(follow, {"q1": "true"})  # same meaning as yes
    assert is_skipped(follow, {})  # the parent was not asked
    # Through a whole interview: the skipped question is never asked nor answered.
    interview = InterviewerOutput(questions=[BOOL, follow])
    asked: list[str] = []
    replies = iter(["no"])

    def ask(prompt: str) -> str:
        asked.append(prompt)
        return next(replies)

    log = answers_from_terminal(interview, ask=ask, tell=lambda _m: None)
    assert [a.question_id for a in log] == ["q1"]
    assert len(asked) == 1


def test_freetext_rejects_empty() -> None:
    question = InterviewQuestion(id="q5", text="Name it")
    assert question.question_type is QuestionType.FREETEXT
    assert validate_answer(question, "") is not None
    assert validate_answer(question, "   ") is not None
    assert validate_answer(question, "calc") is None


def test_enum_question_needs_two_options() -> None:
    with pytest.raises(ValidationError, match="at least 2 options"):
        InterviewQuestion(id="q", text="t", question_type=QuestionType.ENUM, options=["one"])


def test_numeric_range_must_be_ordered() -> None:
    with pytest.raises(ValidationError, match="range_min"):
        InterviewQuestion(
            id="q", text="t", question_type=QuestionType.NUMERIC, range_min=5, range_max=1
        )


# -- 3.2 answer audit trail ----------------------------------------------------------


def test_user_answer_confidence_one() -> None:
    answer = AuditedAnswer(question_id="q1", answer="yes", source=AnswerSource.USER_INTERACTIVE)
    assert answer.confidence == 1.0
    with pytest.raises(ValidationError, match=r"confidence 1\.0"):
        AuditedAnswer(
            question_id="q1", answer="yes", source=AnswerSource.USER_INTERACTIVE, confidence=0.4
        )


def test_auto_answer_includes_assumption() -> None:
    interview = InterviewerOutput(
        questions=[InterviewQuestion(id="q1", text="Which number type do results use?")],
        assumptions=["Results use float numbers throughout"],
    )
    (answer,) = answers_from_approval(interview)
    assert answer.source is AnswerSource.AUTO_ASSUMPTION
    assert answer.matched_assumption == "Results use float numbers throughout"
    with pytest.raises(ValidationError, match="names the assumption"):
        AuditedAnswer(
            question_id="q1", answer="x", source=AnswerSource.AUTO_ASSUMPTION, confidence=0.7
        )


def test_low_confidence_flagged() -> None:
    weak = AuditedAnswer(
        question_id="q7",
        answer="Accepted as stated",
        source=AnswerSource.CLI_APPROVE,
        confidence=0.3,
    )
    sure = AuditedAnswer(question_id="q8", answer="yes", source=AnswerSource.USER_INTERACTIVE)
    warnings = low_confidence_warnings([weak, sure])
    assert len(warnings) == 1 and "q7" in warnings[0] and "0.30" in warnings[0]


def test_answer_supersede_preserves_history() -> None:
    log = AnswerLog()
    first = AuditedAnswer(question_id="q1", answer="no", source=AnswerSource.USER_INTERACTIVE)
    second = AuditedAnswer(question_id="q1", answer="yes", source=AnswerSource.ANSWERS_FILE)
    log.add(first)
    log.add(second)
    assert log.current()["q1"].answer == "yes"
    assert log.history == (first, second)
    assert len(log) == 1


# -- 3.3 approve matching -------------------------------------------------------------


def test_index_pairing_correct_order() -> None:
    assumptions = ["Integers only", "Output goes to stdout"]
    assert match_answer_to_question("Any limits?", assumptions, {}) == ("Integers only", 0.7)
    answer, confidence = match_answer_to_question(
        "Where to print?", assumptions, {"q1": "Integers only"}
    )
    assert (answer, confidence) == ("Output goes to stdout", 0.7)


def test_keyword_overlap_beats_index() -> None:
    assumptions = [
        "Errors are reported as exceptions",
        "Division by zero raises a calculation error with the operator position",
    ]
    answer, confidence = match_answer_to_question(
        "What should division by zero report: calculation error or position?",
        assumptions,
        {},
        index=0,
    )
    assert answer == assumptions[1]
    assert 0.0 < confidence <= 1.0


def test_stopwords_excluded() -> None:
    question = "What is the best approach for the parser?"
    assumptions = ["What is the", "It is for the best of all"]
    answer, confidence = match_answer_to_question(question, assumptions, {}, index=5)
    assert (answer, confidence) == ("Accepted as stated", 0.0)


def test_no_match_returns_accepted() -> None:
    answer = match_answer_to_question(
        "Should the cache expire entries?", ["Colours are rendered in sRGB"], {}, index=3
    )
    assert answer == ("Accepted as stated", 0.0)


def test_no_universal_fallback() -> None:
    questions = [
        "Which logging backend?",
        "Maximum input size?",
        "Support unicode identifiers?",
        "Thread safety required?",
        "Deployment target?",
    ]
    assumptions = ["Plain print statements", "Inputs stay below one megabyte"]
    taken: dict[str, str] = {}
    matched = 0
    for index, question in enumerate(questions):
        answer, confidence = match_answer_to_question(question, assumptions, taken, index=index)
        if confidence > 0:
            matched += 1
            taken[question] = answer
    assert matched <= 2
    assert len(set(taken.values())) == len(taken)  # no assumption answers twice


# -- the three ways answers come in ------------------------------------------------------


def test_terminal_asks_again_after_an_invalid_answer() -> None:
    interview = InterviewerOutput(questions=[BOOL, NUM])
    replies = iter(["maybe", "yes", "500", "42"])
    told: list[str] = []
    log = answers_from_terminal(interview, ask=lambda _p: next(replies), tell=told.append)
    assert {a.question_id: a.answer for a in log} == {"q1": "yes", "q3": "42"}
    assert len(told) == 2 and told[0].startswith("q1:") and told[1].startswith("q3:")
    assert all(a.source is AnswerSource.USER_INTERACTIVE and a.confidence == 1.0 for a in log)


def test_answers_file_names_the_question_of_an_invalid_boolean(tmp_path: Path) -> None:
    path = tmp_path / "answers.yaml"
    path.write_text("q1: maybe\nq2: sqlite\nq3: 7\n")
    interview = InterviewerOutput(questions=[BOOL, ENUM, NUM])
    with pytest.raises(InputError, match=r"answers\.yaml: question q1: 'maybe'"):
        answers_from_file(path, interview)
    path.write_text("q1: yes\nq2: SQLITE\nq3: 7\n")
    log = answers_from_file(path, interview)
    assert {a.question_id: a.answer for a in log} == {"q1": "yes", "q2": "sqlite", "q3": "7"}
    path.write_text("q9: yes\n")
    with pytest.raises(InputError, match="'q9' is not a question"):
        answers_from_file(path, interview)


def test_approve_takes_the_default_of_a_typed_question() -> None:
    typed = InterviewQuestion(
        id="q1", text="Persist to disk?", question_type=QuestionType.BOOLEAN, default="no"
    )
    log = answers_from_approval(InterviewerOutput(questions=[typed], assumptions=["In memory"]))
    (answer,) = log
    assert answer.answer == "no" and answer.confidence == 0.7
    with pytest.raises(InputError, match="q1"):
        answers_from_approval(InterviewerOutput(questions=[BOOL], assumptions=[]))
