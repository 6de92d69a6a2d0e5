"""Per-phase spend caps on top of the total budget (seed 000, 4.3)."""

from __future__ import annotations

import math
from typing import Any

import pytest
from pydantic import ValidationError

from scheduler.budget import BudgetSettings, PhaseBudget, check_dispatch


def test_phase_under_cap_passes() -> None:
    budget = PhaseBudget(phase_caps={"shaping": 0.15})
    budget.record_spend("shaping", 2.0)
    assert budget.check_phase_budget("shaping", 100.0) is True


def test_phase_over_cap_fails() -> None:
    budget = PhaseBudget(phase_caps={"shaping": 0.15})
    budget.record_spend("shaping", 20.0)
    assert budget.check_phase_budget("shaping", 100.0) is False


def test_uncapped_phase_always_passes() -> None:
    budget = PhaseBudget(phase_caps={"shaping": 0.15})
    budget.record_spend("implement", 40.0)
    assert budget.check_phase_budget("implement", 100.0) is True


def test_total_budget_still_enforced() -> None:
    settings = BudgetSettings(budget_usd=50.0, phase_caps={"shaping": 0.15})
    phase_spend = {"shaping": 1.0, "implement": 49.12}
    assert PhaseBudget(phase_spend=phase_spend, phase_caps=settings.phase_caps).check_phase_budget(
        "shaping", 50.0
    )
    reason = check_dispatch("shaping", spend_total=50.12, phase_spend=phase_spend, budget=settings)
    assert reason == "total budget $50.00 spent ($50.12)"


def test_backward_compat_shaping_budget_pct() -> None:
    settings = BudgetSettings.model_validate({"budget_usd": 100, "shaping_budget_pct": 0.15})
    assert settings.phase_caps["shaping"] == 0.15


# --- PhaseBudget -------------------------------------------------------------------


def test_spend_exactly_at_the_cap_fails() -> None:
    budget = PhaseBudget(phase_spend={"shaping": 15.0}, phase_caps={"shaping": 0.15})
    assert budget.check_phase_budget("shaping", 100.0) is False


def test_phase_spend_is_tracked_per_phase() -> None:
    budget = PhaseBudget(phase_caps={"shaping": 0.15})
    budget.record_spend("implement", 90.0)
    budget.record_spend("shaping", 1.0)
    budget.record_spend("shaping", 0.5)
    assert budget.phase_spend == {"implement": 90.0, "shaping": 1.5}
    assert budget.total_spend_usd == 91.5
    # Other phases' spend does not count against the shaping cap.
    assert budget.check_phase_budget("shaping", 100.0) is True


def test_phase_summary_in_dollars_with_a_total() -> None:
    budget = PhaseBudget(
        phase_spend={"shaping": 20.0, "implement": 12.5}, phase_caps={"shaping": 0.15, "test": 0.2}
    )
    assert budget.phase_summary(total_budget=100.0) == {
        "shaping": {"spent": 20.0, "cap_fraction": 0.15, "cap": 15.0, "remaining": 0.0},
        "implement": {"spent": 12.5},
        "test": {"spent": 0.0, "cap_fraction": 0.2, "cap": 20.0, "remaining": 20.0},
    }


def test_phase_summary_without_a_total_gives_the_cap_fraction() -> None:
    budget = PhaseBudget(phase_spend={"shaping": 2.0}, phase_caps={"shaping": 0.15})
    assert budget.phase_summary() == {"shaping": {"spent": 2.0, "cap_fraction": 0.15}}


def test_an_empty_budget_has_an_empty_summary() -> None:
    assert PhaseBudget().phase_summary(total_budget=10.0) == {}


@pytest.mark.parametrize("amount", [-0.01, math.nan, math.inf])
def test_a_negative_or_non_finite_spend_is_rejected(amount: float) -> None:
    budget = PhaseBudget()
    with pytest.raises(ValueError, match="amount"):
        budget.record_spend("shaping", amount)
    assert budget.phase_spend == {}


def test_a_negative_total_is_rejected() -> None:
    with pytest.raises(ValueError, match="total_budget"):
        PhaseBudget(phase_caps={"shaping": 0.15}).check_phase_budget("shaping", -1.0)


@pytest.mark.parametrize("cap", [0, -0.1, 1.5])
def test_a_cap_outside_zero_to_one_is_rejected(cap: float) -> None:
    with pytest.raises(ValidationError, match="shaping"):
        PhaseBudget(phase_caps={"shaping": cap})


# --- BudgetSettings ----------------------------------------------------------------


def test_budget_settings_default_to_no_limit() -> None:
    settings = BudgetSettings()
    assert settings.budget_usd is None
    assert settings.phase_caps == {}


def test_shaping_budget_pct_agreeing_with_phase_caps_is_accepted() -> None:
    settings = BudgetSettings.model_validate(
        {"shaping_budget_pct": 0.15, "phase_caps": {"shaping": 0.15, "implement": 0.6}}
    )
    assert settings.phase_caps == {"shaping": 0.15, "implement": 0.6}


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"shaping_budget_pct": 15}, "fraction in \\(0, 1\\]"),
        ({"shaping_budget_pct": "lots"}, "fraction"),
        ({"shaping_budget_pct": 0.2, "phase_caps": {"shaping": 0.15}}, "disagree"),
        ({"phase_caps": {"implement": 2}}, "implement"),
        ({"budget_usd": -5}, "budget_usd"),
        ({"budget": 50}, "budget"),
    ],
    ids=["percent-not-fraction", "not-a-number", "conflict", "cap-above-one", "negative", "typo"],
)
def test_bad_budget_settings_are_rejected(data: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        BudgetSettings.model_validate(data)


# --- check_dispatch ----------------------------------------------------------------


def test_dispatch_within_every_limit_is_allowed() -> None:
    settings = BudgetSettings(budget_usd=50.0, phase_caps={"implement": 0.24})
    reason = check_dispatch(
        "implement", spend_total=20.0, phase_spend={"implement": 11.99}, budget=settings
    )
    assert reason is None


def test_dispatch_over_the_phase_cap_names_cap_and_spend() -> None:
    settings = BudgetSettings(budget_usd=50.0, phase_caps={"implement": 0.24})
    reason = check_dispatch(
        "implement", spend_total=20.0, phase_spend={"implement": 12.4}, budget=settings
    )
    assert reason == "phase 'implement' spent $12.40 of its cap $12.00 (24% of $50.00)"


def test_dispatch_of_an_uncapped_phase_only_checks_the_total() -> None:
    settings = BudgetSettings(budget_usd=50.0, phase_caps={"shaping": 0.1})
    phase_spend = {"shaping": 9.0, "implement": 40.0}
    assert (
        check_dispatch("implement", spend_total=49.0, phase_spend=phase_spend, budget=settings)
        is None
    )


def test_without_a_total_nothing_limits_dispatch() -> None:
    settings = BudgetSettings(shaping_budget_pct=0.15)
    reason = check_dispatch(
        "shaping", spend_total=1_000.0, phase_spend={"shaping": 900.0}, budget=settings
    )
    assert reason is None


def test_a_negative_spend_is_rejected_by_check_dispatch() -> None:
    settings = BudgetSettings(budget_usd=50.0)
    with pytest.raises(ValueError, match="spend_total"):
        check_dispatch("implement", spend_total=-1.0, phase_spend={}, budget=settings)
    with pytest.raises(ValueError, match="phase_spend\\['implement'\\]"):
        check_dispatch(
            "implement", spend_total=1.0, phase_spend={"implement": -1.0}, budget=settings
        )
