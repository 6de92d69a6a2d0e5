"""EnvironmentSpec, seed 000 section 4.4."""

from __future__ import annotations

import os
import sys

import pytest

from pact_workers.errors import EnvironmentSpecError
from pact_workers.models import EnvironmentSpec

HERE = os.path.dirname(sys.executable)


def test_inherit_path_includes_parent() -> None:
    env = EnvironmentSpec(required_tools=[]).build_env("", parent_env={"PATH": f"{HERE}:/opt/x"})
    assert env["PATH"].split(os.pathsep)[-2:] == [HERE, "/opt/x"]


def test_inherit_path_false_minimal(tmp_path: object) -> None:
    spec = EnvironmentSpec(
        inherit_path=False, extra_path_dirs=[HERE], required_tools=[], python_path=sys.executable
    )
    env = spec.build_env("", parent_env={"PATH": "/opt/parent/bin"})
    assert env["PATH"] == os.pathsep.join([HERE, "/usr/bin"])


def test_missing_tool_detected() -> None:
    spec = EnvironmentSpec(required_tools=["nonexistent-tool-xyz"])
    assert spec.validate_environment() == ["nonexistent-tool-xyz"]
    with pytest.raises(EnvironmentSpecError, match="nonexistent-tool-xyz"):
        spec.build_env("src")


def test_build_env_includes_pythonpath() -> None:
    env = EnvironmentSpec(required_tools=[], python_path=sys.executable).build_env("src:lib")
    assert env["PYTHONPATH"] == "src:lib"


def test_env_vars_are_included_and_secrets_are_not() -> None:
    spec = EnvironmentSpec(required_tools=[], python_path=sys.executable, env_vars={"A": "1"})
    env = spec.build_env("", parent_env={"PATH": HERE, "ANTHROPIC_API_KEY": "secret", "HOME": "/h"})
    assert env["A"] == "1" and env["HOME"] == "/h"
    assert "ANTHROPIC_API_KEY" not in env


def test_unknown_python_names_the_fix() -> None:
    spec = EnvironmentSpec(required_tools=[], python_path="python-does-not-exist")
    with pytest.raises(EnvironmentSpecError, match="environment.python_path"):
        spec.build_env("")
