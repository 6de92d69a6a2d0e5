"""The gates' keys of ``pact.yaml``: ``gates`` (the mode and per-component overrides)
and ``review`` (which verified items wait for a human).

``gates`` takes either the mode alone (``gates: blocking``) or a mapping whose
``mode`` key is the mode and whose other keys are component ids, each with the
dimensions to override (``gates: {mode: blocking, parser: {risk: 4}}``). An
override replaces the computed value and is recorded as an override on every
dispatch of the component.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from pact_workers.errors import SettingsError


class GateMode(StrEnum):
    """``advisory`` records what blocking would have held; ``blocking`` holds it."""

    ADVISORY = "advisory"
    BLOCKING = "blocking"


class ReviewMode(StrEnum):
    """Which verified implement/integrate items wait for a human's approval."""

    NONE = "none"
    GATED = "gated"  # those whose variety score reaches the threshold (7)
    ALL = "all"


class DimensionOverride(BaseModel):
    """Dimensions ``pact.yaml`` sets for one component (each in [1, 4])."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    novelty: int | None = Field(default=None, ge=1, le=4, strict=True)
    scope: int | None = Field(default=None, ge=1, le=4, strict=True)
    uncertainty: int | None = Field(default=None, ge=1, le=4, strict=True)
    risk: int | None = Field(default=None, ge=1, le=4, strict=True)

    def given(self) -> dict[str, int]:
        return {name: value for name, value in self.model_dump().items() if value is not None}


class GatesSettings(BaseModel):
    """``gates:``: see the module docstring."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    mode: GateMode = GateMode.ADVISORY
    components: dict[str, DimensionOverride] = Field(default_factory=dict)
    #: Teachbacks of one item the checker may reject before the item fails.
    max_teachback_rounds: int = Field(default=3, ge=1)

    def check_components(self, known: Iterable[str], where: str) -> None:
        """Every component an override names is one of ``known``.

        Raises:
            SettingsError: naming the file (``where``), the key and the components.
        """
        unknown = sorted(set(self.components) - set(known))
        if unknown:
            raise SettingsError(
                f"{where}: gates: {', '.join(map(repr, unknown))} is not a component of "
                "the tree; name a component to override its dimensions (or use mode:)"
            )

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, data: Any) -> Any:
        if isinstance(data, str):
            return {"mode": data}
        if isinstance(data, dict) and "components" not in data:
            known = {"mode", "max_teachback_rounds"}
            components = {k: v for k, v in data.items() if k not in known}
            return {**{k: v for k, v in data.items() if k in known}, "components": components}
        return data
