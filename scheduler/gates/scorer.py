"""The variety score and the gates it selects (seed 003): the one source of truth.

Rules:

- a work item is scored on four dimensions (novelty, scope, uncertainty, risk), each
  an ``int`` in [1, 4]; ``bool`` is not an int here, and nothing is rounded;
- its variety score is their sum, in [4, 16];
- the gates follow from the score alone, never from a flag set by hand: from
  :data:`ORCHESTRATE_MIN` (7) on, the teachback is blocking and the auditor is
  required; below it the teachback is advisory and no auditor is asked;
- the workflow route names the band the score falls in (4-6 ``comPACT``, 7-10
  ``orchestrate``, 11-14 ``plan-mode``, 15-16 ``research-spike``).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

DIMENSIONS = ("novelty", "scope", "uncertainty", "risk")
MIN_DIMENSION, MAX_DIMENSION = 1, 4
MIN_SCORE, MAX_SCORE = 4, 16

#: The highest score of the low band (comPACT), and the first that blocks.
COMPACT_MAX = 6
ORCHESTRATE_MIN = COMPACT_MAX + 1
PLAN_MODE_MIN = 11
RESEARCH_SPIKE_MIN = 15

TeachbackMode = Literal["blocking", "advisory"]
WorkflowRoute = Literal["comPACT", "orchestrate", "plan-mode", "research-spike"]


class ScoreError(ValueError):
    """A dimension or a score outside its range (or not an int)."""


class Gates(BaseModel):
    """What a score asks of a work item (see :func:`gates_for_score`)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    teachback_mode: TeachbackMode
    auditor_required: bool
    workflow_route: WorkflowRoute


def validate_dimension(value: object, name: str) -> int:
    """``value`` as a dimension named ``name``: an int in [1, 4].

    Raises:
        ScoreError: naming the dimension and the value given.
    """
    if isinstance(value, bool) or not isinstance(value, int):
        raise ScoreError(f"{name}: must be an integer from 1 to 4, got {value!r}")
    if not MIN_DIMENSION <= value <= MAX_DIMENSION:
        raise ScoreError(f"{name}: must be from 1 to 4, got {value}")
    return value


def validate_score(score: object) -> int:
    """``score`` as a variety score: an int in [4, 16].

    Raises:
        ScoreError: naming the value given.
    """
    if isinstance(score, bool) or not isinstance(score, int):
        raise ScoreError(f"variety score: must be an integer from 4 to 16, got {score!r}")
    if not MIN_SCORE <= score <= MAX_SCORE:
        raise ScoreError(f"variety score: must be from 4 to 16, got {score}")
    return score


def score_variety(novelty: int, scope: int, uncertainty: int, risk: int) -> int:
    """The variety score: the sum of the four validated dimensions, in [4, 16]."""
    values = {"novelty": novelty, "scope": scope, "uncertainty": uncertainty, "risk": risk}
    return sum(validate_dimension(value, name) for name, value in values.items())


def route_workflow(score: int) -> WorkflowRoute:
    """The workflow band of ``score``."""
    validate_score(score)
    if score >= RESEARCH_SPIKE_MIN:
        return "research-spike"
    if score >= PLAN_MODE_MIN:
        return "plan-mode"
    if score >= ORCHESTRATE_MIN:
        return "orchestrate"
    return "comPACT"


def teachback_mode_for_score(score: int) -> TeachbackMode:
    """``blocking`` from :data:`ORCHESTRATE_MIN` on, ``advisory`` below it."""
    return "blocking" if validate_score(score) >= ORCHESTRATE_MIN else "advisory"


def auditor_required_for_score(score: int) -> bool:
    """True when the auditor must review the item's output (score >= 7)."""
    return validate_score(score) >= ORCHESTRATE_MIN


def gates_for_score(score: int) -> Gates:
    """The canonical gate configuration for ``score``."""
    return Gates(
        teachback_mode=teachback_mode_for_score(score),
        auditor_required=auditor_required_for_score(score),
        workflow_route=route_workflow(score),
    )
