"""``pact.yaml``: one validated settings object, built at the edge.

Unknown keys are an error that names the key; :func:`load_settings` is the only
place the file is read.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from pact_workers.agents.factory import AgentsSettings
from pact_workers.agents.pricing import Price
from pact_workers.errors import SettingsError
from pact_workers.models.documents import (
    given,
    load_yaml,
    parse_value_problem,
    read_input_file,
    yaml_position,
)
from pact_workers.models.environment import EnvironmentSpec
from scheduler.budget import BudgetSettings
from scheduler.cache.base import CacheMode
from scheduler.gates.settings import GatesSettings, ReviewMode
from scheduler.git_promotion import AUTHOR
from scheduler.timeouts import ImpatienceLevel, TimeoutConfig
from scheduler.validation.findings import QualityMode
from scheduler.wavefront import SchedulingMode

#: Largest pact.yaml read (a settings file is a few KB).
MAX_SETTINGS_BYTES = 1024 * 1024

#: Phases a cap may name: the work-item phases, and Pact's own phases before them
#: (kept so that a Pact configuration loads; nothing in a tree run spends in those).
CAPPABLE_PHASES = (
    "contract",
    "test",
    "implement",
    "integrate",
    "interview",
    "decompose",
    "shaping",
)


class Settings(BaseModel):
    """Everything a run can be told, with defaults that work on a laptop."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    scheduling: SchedulingMode = SchedulingMode.WAVEFRONT
    max_concurrent_agents: int | None = Field(default=None, ge=1)
    #: Transient failures retried per item; past them the run pauses (never fails).
    max_retries: int = Field(default=3, ge=0)
    #: Attempts per item whose output the harness rejects (tests fail, bad schema).
    max_attempts: int = Field(default=3, ge=1)
    backoff_base_s: float = Field(default=1.0, ge=0, allow_inf_nan=False)
    backoff_cap_s: float = Field(default=60.0, ge=0, allow_inf_nan=False)
    #: Hard limit for one verification run in the sandbox.
    verify_timeout_s: float = Field(default=300.0, gt=0, allow_inf_nan=False)
    environment: EnvironmentSpec = Field(default_factory=EnvironmentSpec)
    #: Stall timeouts per role, scaled by impatience (seed 000, 4.2).
    impatience: ImpatienceLevel = ImpatienceLevel.NORMAL
    role_timeouts: dict[str, int] = Field(default_factory=dict)
    #: Total budget and per-phase caps as fractions of it (seed 000, 4.3).
    budget_usd: float | None = Field(default=None, gt=0)
    phase_caps: dict[str, float] = Field(default_factory=dict)
    shaping_budget_pct: float | None = Field(default=None, gt=0, le=1)
    #: Components failing the same way in one phase before the run pauses (seed 000, 1.4).
    systemic_threshold: int = Field(default=3, ge=2)
    #: Backend and model per role (``default`` and one entry per role).
    agents: AgentsSettings = Field(default_factory=AgentsSettings)
    #: Prices of models the built-in table does not know (USD per million tokens).
    prices: dict[str, Price] = Field(default_factory=dict)
    #: What a contract-quality finding (vague wording, side effects) does: ``warn``
    #: records and shows it; ``block`` rejects the contract attempt with it as feedback.
    contract_quality: QualityMode = QualityMode.WARN
    #: The action cache (``scheduler.cache``): ``verify`` serves an identical work item's
    #: verified result instead of calling the agent and verifies it again, ``trust``
    #: does not verify it again, ``off`` neither reads nor writes the cache. Unset:
    #: ``verify``, except for the replay and noop agents (``off``).
    cache: CacheMode | None = None
    #: Promotion of verified artifacts into the project: ``files`` (default) writes
    #: them; ``git`` also makes each promotion one commit there (``scheduler.git_promotion``),
    #: with ``promote_author`` (``Name <email>``) as author.
    promote: Literal["files", "git"] = "files"
    promote_author: str = "pact-fleet <pact-fleet@localhost>"
    #: Days after its verification a component counts as stale (``pact status``).
    staleness_window_days: int = Field(default=90, ge=1)
    #: Risk-scored gates (``scheduler.gates``): ``advisory`` (records what blocking
    #: would hold) or ``blocking`` (a teachback must be approved before the work call
    #: of an item scoring 7 or more), with per-component dimension overrides.
    gates: GatesSettings = Field(default_factory=GatesSettings)
    #: Verified implement/integrate items that wait for a human: none, gated, all.
    review: ReviewMode = ReviewMode.NONE

    @property
    def timeouts(self) -> TimeoutConfig:
        return TimeoutConfig(impatience=self.impatience, role_timeouts=self.role_timeouts)

    @property
    def budget(self) -> BudgetSettings:
        return BudgetSettings(
            budget_usd=self.budget_usd,
            phase_caps=self.phase_caps,
            shaping_budget_pct=self.shaping_budget_pct,
        )

    @field_validator(
        "max_concurrent_agents",
        "max_retries",
        "max_attempts",
        "backoff_base_s",
        "backoff_cap_s",
        "verify_timeout_s",
        "budget_usd",
        "systemic_threshold",
        "staleness_window_days",
        mode="before",
    )
    @classmethod
    def _no_booleans(cls, value: object) -> object:
        # YAML reads yes/no/true/false as booleans, and a boolean passes for 1 or 0.
        if isinstance(value, bool):
            raise ValueError("a number, not a yes/no")
        return value

    @field_validator("promote_author")
    @classmethod
    def _check_author(cls, value: str) -> str:
        if not AUTHOR.match(value):
            raise ValueError("write the author as 'Name <email>'")
        return value

    @model_validator(mode="after")
    def _check_nested(self) -> Settings:
        # Build the nested objects once so their own validation errors surface here.
        self.timeouts  # noqa: B018
        if self.backoff_base_s > self.backoff_cap_s:
            raise ValueError(
                f"backoff_base_s ({self.backoff_base_s}) is above backoff_cap_s "
                f"({self.backoff_cap_s}): the first wait would exceed the longest; lower "
                "the base or raise the cap"
            )
        caps = self.budget.phase_caps
        unknown = sorted(set(caps) - set(CAPPABLE_PHASES))
        if unknown:
            raise ValueError(
                f"phase_caps: unknown phase(s) {', '.join(map(repr, unknown))}; "
                f"choose from {', '.join(CAPPABLE_PHASES)}"
            )
        if caps and self.budget_usd is None:
            raise ValueError(
                "phase_caps (and shaping_budget_pct) are fractions of budget_usd, which is "
                "not set: add budget_usd (USD) or remove the caps"
            )
        return self


def load_settings(path: Path, **overrides: Any) -> Settings:
    """Read ``pact.yaml`` if it exists; a missing file means all defaults.

    Raises:
        SettingsError: naming the file and every bad or unknown key.
    """
    data: dict[str, Any] = {}
    if path.exists() or path.is_symlink():
        try:
            text = read_input_file(path, MAX_SETTINGS_BYTES).decode("utf-8")
        except IsADirectoryError:
            raise SettingsError(
                f"{path}: is a directory; pact.yaml must be a YAML file of settings"
            ) from None
        except UnicodeDecodeError as exc:
            raise SettingsError(f"{path}: not UTF-8 text; save it as UTF-8") from exc
        except OSError as exc:
            raise SettingsError(f"{path}: cannot be read ({exc.strerror or exc})") from exc
        try:
            loaded = load_yaml(text)  # a key set twice is refused, not the first dropped
        except yaml.YAMLError as exc:
            raise SettingsError(f"{path}: cannot be parsed{yaml_position(exc)}") from exc
        except ValueError as exc:  # a value YAML cannot convert: a giant number, a bad date
            raise SettingsError(f"{path}: cannot be parsed: {parse_value_problem(exc)}") from None
        except RecursionError:
            raise SettingsError(f"{path}: nested deeper than the parser allows") from None
        if loaded is not None and not isinstance(loaded, dict):
            raise SettingsError(f"{path}: expected a mapping of settings")
        data = loaded or {}
    data.update({k: v for k, v in overrides.items() if v is not None})
    try:
        return Settings.model_validate(data)
    except ValidationError as exc:
        raise SettingsError(f"{path}: " + "; ".join(_describe(e) for e in exc.errors())) from exc


def _describe(error: Any) -> str:
    where = ".".join(str(p) for p in error["loc"])
    if error["type"] == "extra_forbidden":
        return f"unknown key {where!r}"
    message = str(error["msg"]).removeprefix("Value error, ")
    message += given(error)
    return f"{where}: {message}" if where else message
