"""Spend caps per pipeline phase on top of the total budget (seed 000, 4.3).

A phase cap is a fraction of the total budget (``shaping: 0.15`` = 15 %). Phases
without a cap are limited only by the total. :func:`check_dispatch` is the one
decision the scheduler needs: may one more item of this phase be dispatched?

``pact.yaml``::

    budget_usd: 50
    phase_caps:
      shaping: 0.15
    # shaping_budget_pct: 0.15   # older spelling of phase_caps.shaping
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = ["BudgetSettings", "PhaseBudget", "check_dispatch", "format_usd"]

#: A cap is a fraction of the total budget: more than nothing, at most all of it.
CapFraction = Annotated[float, Field(gt=0, le=1)]


class PhaseBudget(BaseModel):
    """Spend tracked per phase, independently of the project's total spend."""

    model_config = ConfigDict(extra="forbid")

    phase_spend: dict[str, Annotated[float, Field(ge=0)]] = Field(
        default_factory=dict,
        description="Spend per phase in USD: {'interview': 0.50, 'decompose': 1.20, ...}",
    )
    phase_caps: dict[str, CapFraction] = Field(
        default_factory=dict,
        description="Max spend per phase as a fraction of the total: {'shaping': 0.15}",
    )

    @property
    def total_spend_usd(self) -> float:
        """The sum of every phase's spend."""
        return sum(self.phase_spend.values())

    def record_spend(self, phase: str, amount: float) -> None:
        """Add ``amount`` USD to ``phase``'s spend.

        Raises:
            ValueError: ``amount`` is negative or not a finite number.
        """
        _check_usd("amount", amount)
        self.phase_spend[phase] = self.phase_spend.get(phase, 0.0) + amount

    def check_phase_budget(self, phase: str, total_budget: float) -> bool:
        """True while ``phase`` has budget left under its cap; always True when uncapped.

        Only the phase's own spend counts here; the total is :func:`check_dispatch`'s job.

        Args:
            phase: The pipeline phase.
            total_budget: The run's total budget in USD, which the cap is a fraction of.

        Raises:
            ValueError: ``total_budget`` is negative or not a finite number.
        """
        _check_usd("total_budget", total_budget)
        cap = self.phase_caps.get(phase)
        if cap is None:
            return True
        return self.phase_spend.get(phase, 0.0) < cap * total_budget

    def phase_summary(self, total_budget: float | None = None) -> dict[str, dict[str, float]]:
        """Spend and caps of every phase that has either.

        Returns:
            ``{phase: {"spent": usd}}``, plus ``"cap_fraction"`` for a capped phase, plus
            ``"cap"`` and ``"remaining"`` in USD when ``total_budget`` is given
            (``remaining`` is never below 0). Uncapped phases have no cap keys.

        Raises:
            ValueError: ``total_budget`` is negative or not a finite number.
        """
        if total_budget is not None:
            _check_usd("total_budget", total_budget)
        summary: dict[str, dict[str, float]] = {}
        for phase in dict.fromkeys([*self.phase_spend, *self.phase_caps]):
            spent = self.phase_spend.get(phase, 0.0)
            row = {"spent": spent}
            cap = self.phase_caps.get(phase)
            if cap is not None:
                row["cap_fraction"] = cap
                if total_budget is not None:
                    row["cap"] = cap * total_budget
                    row["remaining"] = max(0.0, cap * total_budget - spent)
            summary[phase] = row
        return summary


class BudgetSettings(BaseModel):
    """The budget part of ``pact.yaml``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    #: The total budget of a run in USD; None means no limit.
    budget_usd: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    phase_caps: dict[str, CapFraction] = Field(default_factory=dict)
    #: Older spelling of ``phase_caps["shaping"]`` (a fraction despite the name).
    shaping_budget_pct: float | None = None

    @model_validator(mode="before")
    @classmethod
    def _shaping_budget_pct_is_a_phase_cap(cls, data: Any) -> Any:
        if not isinstance(data, Mapping) or data.get("shaping_budget_pct") is None:
            return data
        pct = data["shaping_budget_pct"]
        if isinstance(pct, bool) or not isinstance(pct, int | float) or not 0 < pct <= 1:
            raise ValueError(
                f"shaping_budget_pct must be a fraction in (0, 1], e.g. 0.15 for 15%; got {pct!r}"
            )
        caps = dict(data.get("phase_caps") or {})
        if "shaping" in caps and caps["shaping"] != pct:
            raise ValueError(
                f"shaping_budget_pct ({pct}) and phase_caps.shaping ({caps['shaping']}) "
                "disagree; keep only phase_caps.shaping"
            )
        caps["shaping"] = float(pct)
        return {**data, "phase_caps": caps}


def check_dispatch(
    phase: str,
    *,
    spend_total: float,
    phase_spend: Mapping[str, float],
    budget: BudgetSettings,
    committed_usd: Mapping[str, float] | None = None,
    estimate_usd: float = 0.0,
) -> str | None:
    """Decide whether one more item of ``phase`` may be dispatched.

    The total budget applies whatever the phase; a phase cap applies on top. Caps are
    fractions of ``budget.budget_usd``, so without a total they do not apply. Spend so
    far, what attempts in flight are expected to cost (``committed_usd`` per phase) and
    what this attempt is expected to cost (``estimate_usd``) must all fit.

    Args:
        phase: The phase of the item to dispatch.
        spend_total: The run's total spend so far in USD.
        phase_spend: Spend so far per phase in USD.
        budget: The budget settings.
        committed_usd: Expected cost of the attempts in flight, per phase, in USD.
        estimate_usd: Expected cost of the attempt to dispatch, in USD.

    Returns:
        None when the item may go, else the reason it may not, naming the limit and
        the spend.

    Raises:
        ValueError: a spend or estimate is negative or not a finite number.
    """
    _check_usd("spend_total", spend_total)
    _check_usd("estimate_usd", estimate_usd)
    for name, spent in phase_spend.items():
        _check_usd(f"phase_spend[{name!r}]", spent)
    committed = dict(committed_usd or {})
    for name, amount in committed.items():
        _check_usd(f"committed_usd[{name!r}]", amount)
    total_usd = budget.budget_usd
    if total_usd is None:
        return None
    if spend_total >= total_usd:
        return f"total budget {format_usd(total_usd)} spent ({format_usd(spend_total)})"
    in_flight = sum(committed.values())
    if spend_total + in_flight + estimate_usd > total_usd:
        return (
            f"total budget {format_usd(total_usd)}: {format_usd(spend_total)} spent, "
            f"{format_usd(in_flight)} committed to attempts in flight, and one {phase} "
            f"attempt may cost {format_usd(estimate_usd)}"
        )
    cap = budget.phase_caps.get(phase)
    if cap is None:
        return None
    spent = phase_spend.get(phase, 0.0)
    limit = cap * total_usd
    if spent < limit and spent + committed.get(phase, 0.0) + estimate_usd <= limit:
        return None
    return (
        f"phase {phase!r} spent {format_usd(spent)} of its cap {format_usd(limit)} "
        f"({cap * 100:g}% of {format_usd(total_usd)})"
        + (f"; one more attempt may cost {format_usd(estimate_usd)}" if spent < limit else "")
    )


def format_usd(amount: float) -> str:
    """Dollars with enough digits to tell small amounts apart: $0.0001 is not $0.00.

    At least two decimals; below a dollar up to four, and below a cent two significant
    digits ($0.00019).
    """
    if amount == 0 or not math.isfinite(amount):
        return f"${amount:.2f}"
    size = abs(amount)
    if size >= 1:
        return f"${amount:,.2f}"
    decimals = 4 if size >= 0.01 else min(10, 1 - math.floor(math.log10(size)))
    text = f"{amount:.{decimals}f}"
    whole, _, fraction = text.partition(".")
    fraction = fraction.rstrip("0").ljust(2, "0") if size >= 0.01 else fraction
    return f"${whole}.{fraction}"


def _check_usd(name: str, amount: float) -> None:
    if not math.isfinite(amount) or amount < 0:
        raise ValueError(f"{name} must be a finite amount >= 0 USD, got {amount!r}")
