"""Stall timeouts per agent role, scaled by one impatience knob (seed 000, 4.2).

``pact.yaml``::

    impatience: normal        # patient | normal | impatient
    role_timeouts:
      test_author: 450        # merged with the defaults; the other roles keep theirs
"""

from __future__ import annotations

import math
from enum import StrEnum
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, field_validator

__all__ = [
    "DEFAULT_ROLE_TIMEOUTS_S",
    "DEFAULT_TIMEOUT_S",
    "IMPATIENCE_MULTIPLIER",
    "TIMEOUT_FLOOR_S",
    "ImpatienceLevel",
    "TimeoutConfig",
]


class ImpatienceLevel(StrEnum):
    PATIENT = "patient"  # 600 s stall timeout at the 300 s default
    NORMAL = "normal"  # 300 s
    IMPATIENT = "impatient"  # 150 s


IMPATIENCE_MULTIPLIER: dict[ImpatienceLevel, float] = {
    ImpatienceLevel.PATIENT: 2.0,
    ImpatienceLevel.NORMAL: 1.0,
    ImpatienceLevel.IMPATIENT: 0.5,
}

#: Stall timeout of a role that ``role_timeouts`` does not name, before scaling.
DEFAULT_TIMEOUT_S = 300

#: No effective timeout is shorter: a model needs this long to say anything at all.
TIMEOUT_FLOOR_S = 30

DEFAULT_ROLE_TIMEOUTS_S: dict[str, int] = {
    "decomposer": 300,
    "contract_author": 300,
    "test_author": 300,
    "code_author": 300,
    "integrator": 300,
    "trace_analyst": 180,
}


class TimeoutConfig(BaseModel):
    """Per-role stall timeouts in seconds and the impatience level that scales them."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    impatience: ImpatienceLevel = ImpatienceLevel.NORMAL
    role_timeouts: dict[str, Annotated[int, Field(gt=0)]] = Field(
        default_factory=lambda: dict(DEFAULT_ROLE_TIMEOUTS_S),
        description="Stall timeout in seconds per agent role, before impatience scaling",
    )

    @field_validator("role_timeouts")
    @classmethod
    def _merge_with_defaults(cls, value: dict[str, int]) -> dict[str, int]:
        # A role name nobody reads is a typo that silently does nothing: reject it.
        unknown = sorted(set(value) - set(DEFAULT_ROLE_TIMEOUTS_S))
        if unknown:
            raise ValueError(
                f"unknown role(s) {', '.join(map(repr, unknown))}; expected one of "
                + ", ".join(DEFAULT_ROLE_TIMEOUTS_S)
            )
        # Overriding one role must not drop the defaults of the others.
        return {**DEFAULT_ROLE_TIMEOUTS_S, **value}

    def get_timeout(self, role: str) -> int:
        """Effective stall timeout in seconds for ``role``, scaled by the impatience level.

        ``role_timeouts[role]`` (or :data:`DEFAULT_TIMEOUT_S` for a role it does not
        name) times 2 (patient), 1 (normal) or 0.5 (impatient), rounded up, and never
        less than :data:`TIMEOUT_FLOOR_S`.
        """
        base_s = self.role_timeouts.get(role, DEFAULT_TIMEOUT_S)
        scaled_s = math.ceil(base_s * IMPATIENCE_MULTIPLIER[self.impatience])
        return max(TIMEOUT_FLOOR_S, scaled_s)
