"""Per-role stall timeouts scaled by impatience (seed 000, 4.2)."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from pact_workers.models.work import Role
from scheduler.timeouts import DEFAULT_ROLE_TIMEOUTS_S, ImpatienceLevel, TimeoutConfig


def test_patient_doubles_timeout() -> None:
    config = TimeoutConfig(impatience=ImpatienceLevel.PATIENT)
    assert config.role_timeouts["code_author"] == 300
    assert config.get_timeout("code_author") == 600


def test_impatient_halves_timeout() -> None:
    config = TimeoutConfig(impatience=ImpatienceLevel.IMPATIENT)
    assert config.get_timeout("code_author") == 150


def test_floor_at_30() -> None:
    config = TimeoutConfig(impatience=ImpatienceLevel.IMPATIENT, role_timeouts={"test_author": 20})
    assert config.get_timeout("test_author") == 30


def test_role_override() -> None:
    config = TimeoutConfig(role_timeouts={"test_author": 450})
    assert config.get_timeout("test_author") == 450


def test_unknown_role_uses_default() -> None:
    config = TimeoutConfig()
    assert "interviewer" not in config.role_timeouts
    assert config.get_timeout("interviewer") == 300


def test_the_defaults_are_the_seeds_plus_the_integrator() -> None:
    assert TimeoutConfig().role_timeouts == {
        "decomposer": 300,
        "contract_author": 300,
        "test_author": 300,
        "code_author": 300,
        "integrator": 300,
        "trace_analyst": 180,
    }


def test_an_override_keeps_the_other_roles_defaults() -> None:
    config = TimeoutConfig.model_validate({"role_timeouts": {"test_author": 450}})
    assert config.role_timeouts == {**DEFAULT_ROLE_TIMEOUTS_S, "test_author": 450}
    assert config.get_timeout("trace_analyst") == 180


def test_overrides_are_still_scaled_by_impatience() -> None:
    config = TimeoutConfig.model_validate(
        {"impatience": "patient", "role_timeouts": {"test_author": 450, "trace_analyst": 120}}
    )
    assert config.get_timeout("test_author") == 900
    assert config.get_timeout("trace_analyst") == 240
    assert config.get_timeout("unknown_role") == 600


def test_a_role_member_works_as_the_role_name() -> None:
    config = TimeoutConfig(role_timeouts={"code_author": 420})
    assert config.get_timeout(Role.CODE_AUTHOR) == 420
    assert config.get_timeout(Role.INTEGRATOR) == 300


def test_an_odd_timeout_halves_upwards() -> None:
    config = TimeoutConfig(impatience="impatient", role_timeouts={"code_author": 301})
    assert config.get_timeout("code_author") == 151


@pytest.mark.parametrize(
    ("data", "where"),
    [
        ({"impatience": "very"}, "impatience"),
        ({"role_timeouts": {"test_author": 0}}, "test_author"),
        ({"role_timeouts": {"test_author": -5}}, "test_author"),
        ({"role_timeouts": {"test_autor": 450}}, "test_autor"),
        ({"stall_timeout": 300}, "stall_timeout"),
    ],
    ids=["bad-impatience", "zero", "negative", "typo-in-role", "unknown-key"],
)
def test_bad_config_is_rejected_naming_the_key(data: dict[str, Any], where: str) -> None:
    with pytest.raises(ValidationError, match=where):
        TimeoutConfig.model_validate(data)


def test_config_is_a_frozen_value() -> None:
    config = TimeoutConfig()
    with pytest.raises(ValidationError):
        config.impatience = ImpatienceLevel.PATIENT  # type: ignore[misc]
