"""Matching a question to an assumption for ``--approve`` (seed 000, 3.3).

Pact used to answer every question it could not pair with the first assumption,
so unrelated questions all got the same answer (stigmergy's recorded interview
shows it). The rules here, in order of strength:

1. A keyword match: the assumption sharing the most significant words with the
   question (at least :data:`MIN_SHARED_WORDS`), confidence = shared words over the
   larger word count of the two. It beats index pairing: it says what it is about.
2. Index pairing: the question's position among the questions, when an assumption
   sits at that position and no earlier question took it; confidence 0.7.
3. Nothing: ``("Accepted as stated", 0.0)``. There is no universal fallback.

Significant words are lower-cased words of three or more characters that are not
stopwords.
"""

from __future__ import annotations

import re

__all__ = [
    "ACCEPTED_AS_STATED",
    "INDEX_CONFIDENCE",
    "MIN_SHARED_WORDS",
    "STOPWORDS",
    "match_answer_to_question",
    "significant_words",
]

ACCEPTED_AS_STATED = "Accepted as stated"
INDEX_CONFIDENCE = 0.7
MIN_SHARED_WORDS = 3

_STOPWORD_TEXT = """
    a about above after again all also am an and any are as at be been before being
    below between both but by can could did do does doing down during each either etc
    few for from further had has have having he her here hers him his how i if in into
    is it its itself just me more most my no nor not now of off on once only or other
    our ours out over own same she should so some such than that the their theirs them
    then there these they this those through to too under until up use used using very
    was we were what when where which while who whom why will with would yes you your
    yours should shall may might must let lets get gets
    """
STOPWORDS = frozenset(_STOPWORD_TEXT.split())

_WORD = re.compile(r"[a-z0-9_]+")


def significant_words(text: str) -> set[str]:
    """The words of ``text`` that can carry a match (no stopwords, no short words)."""
    return {w for w in _WORD.findall(text.lower()) if len(w) >= 3 and w not in STOPWORDS}


def match_answer_to_question(
    question: str,
    assumptions: list[str],
    existing_answers: dict[str, str],
    *,
    index: int | None = None,
) -> tuple[str, float]:
    """Match a question to the best assumption for auto-approval.

    Args:
        question: the question's text.
        assumptions: the interviewer's assumptions, in its order.
        existing_answers: the answers already given to earlier questions (question id
            or text -> answer), in question order; an assumption one of them holds is
            not paired by index again.
        index: the question's position among the questions (default: the number of
            answers already given, i.e. questions are matched in order).

    Returns:
        (answer, confidence), confidence between 0.0 and 1.0; see the module docstring.
    """
    position = len(existing_answers) if index is None else index
    used = set(existing_answers.values())
    q_words = significant_words(question)
    best: tuple[int, float, str] | None = None
    for assumption in assumptions:
        a_words = significant_words(assumption)
        shared = len(q_words & a_words)
        if shared < MIN_SHARED_WORDS:
            continue
        confidence = shared / max(len(q_words), len(a_words))
        if best is None or (shared, confidence) > (best[0], best[1]):
            best = (shared, confidence, assumption)
    if best is not None:
        return best[2], min(1.0, best[1])
    if 0 <= position < len(assumptions) and assumptions[position] not in used:
        return assumptions[position], INDEX_CONFIDENCE
    return ACCEPTED_AS_STATED, 0.0
