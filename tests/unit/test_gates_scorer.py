"""The variety scorer: dimensions, scores, routes and the gates they select."""

from __future__ import annotations

import pytest

from scheduler.gates import (
    ScoreError,
    auditor_required_for_score,
    gates_for_score,
    route_workflow,
    score_variety,
    teachback_mode_for_score,
    validate_dimension,
    validate_score,
)


@pytest.mark.parametrize("value", [1, 2, 3, 4])
def test_validate_dimension_accepts_one_to_four(value: int) -> None:
    assert validate_dimension(value, "scope") == value


@pytest.mark.parametrize("value", [0, 5, -1, 2.0, "3", None, True])
def test_validate_dimension_rejects_values_outside_one_to_four_naming_the_dimension(
    value: object,
) -> None:
    with pytest.raises(ScoreError, match="risk"):
        validate_dimension(value, "risk")


@pytest.mark.parametrize("score", [4, 7, 16])
def test_validate_score_accepts_four_to_sixteen(score: int) -> None:
    assert validate_score(score) == score


@pytest.mark.parametrize("score", [3, 17, 0, 7.0, False, "7"])
def test_validate_score_rejects_values_outside_four_to_sixteen(score: object) -> None:
    with pytest.raises(ScoreError, match="variety score"):
        validate_score(score)


def test_score_variety_sums_the_four_dimensions() -> None:
    assert score_variety(1, 1, 1, 1) == 4
    assert score_variety(2, 2, 1, 2) == 7
    assert score_variety(4, 4, 4, 4) == 16


def test_score_variety_rejects_an_invalid_dimension_by_name() -> None:
    with pytest.raises(ScoreError, match="uncertainty"):
        score_variety(1, 1, 5, 1)
    with pytest.raises(ScoreError, match="novelty"):
        score_variety(0, 1, 1, 1)


@pytest.mark.parametrize(
    ("score", "route"),
    [
        (4, "comPACT"),
        (6, "comPACT"),
        (7, "orchestrate"),
        (10, "orchestrate"),
        (11, "plan-mode"),
        (14, "plan-mode"),
        (15, "research-spike"),
        (16, "research-spike"),
    ],
)
def test_route_workflow_bands(score: int, route: str) -> None:
    assert route_workflow(score) == route


def test_teachback_mode_boundary_six_is_advisory_and_seven_is_blocking() -> None:
    assert teachback_mode_for_score(6) == "advisory"
    assert teachback_mode_for_score(7) == "blocking"
    assert teachback_mode_for_score(4) == "advisory"
    assert teachback_mode_for_score(16) == "blocking"


def test_auditor_required_boundary_six_is_not_required_and_seven_is() -> None:
    assert auditor_required_for_score(6) is False
    assert auditor_required_for_score(7) is True


def test_gates_for_score_boundaries_six_and_seven() -> None:
    low = gates_for_score(6)
    high = gates_for_score(7)
    assert (low.teachback_mode, low.auditor_required, low.workflow_route) == (
        "advisory",
        False,
        "comPACT",
    )
    assert (high.teachback_mode, high.auditor_required, high.workflow_route) == (
        "blocking",
        True,
        "orchestrate",
    )


@pytest.mark.parametrize(
    "function",
    [route_workflow, teachback_mode_for_score, auditor_required_for_score, gates_for_score],
)
@pytest.mark.parametrize("score", [3, 17])
def test_gate_functions_refuse_scores_out_of_range(function: object, score: int) -> None:
    with pytest.raises(ScoreError):
        function(score)  # type: ignore[operator]
