"""Sandbox image tags: new for a changed environment, Dockerfile or base; the same otherwise."""

from __future__ import annotations

import re

import pytest

from pact_workers.classify import classify_error
from pact_workers.models import EnvironmentSpec, ErrorClass
from pact_workers.sandbox import images
from pact_workers.sandbox.images import (
    DEFAULT_BASE,
    SandboxImageMissing,
    default_base_image,
    dockerfile_bytes,
    image_tag,
)
from tests.conftest import REPO

SPEC = EnvironmentSpec(python_path="python3", required_tools=["pytest"])
DOCKERFILE = b"FROM ${BASE_IMAGE}\n"
BASE = "pact-sandbox-base:bookworm"


def test_the_tag_is_the_repository_and_twelve_hex_digits() -> None:
    assert re.fullmatch(r"pact-sandbox:[0-9a-f]{12}", image_tag(SPEC, DOCKERFILE, BASE))


def test_the_tag_is_stable_for_an_unchanged_environment() -> None:
    same = EnvironmentSpec.model_validate_json(SPEC.model_dump_json())
    assert image_tag(SPEC, DOCKERFILE, BASE) == image_tag(same, DOCKERFILE, BASE)


def test_env_var_order_does_not_change_the_tag() -> None:
    one = EnvironmentSpec(env_vars={"A": "1", "B": "2"})
    two = EnvironmentSpec(env_vars={"B": "2", "A": "1"})
    assert image_tag(one, DOCKERFILE, BASE) == image_tag(two, DOCKERFILE, BASE)


@pytest.mark.parametrize(
    "change",
    [
        {"python_path": "python3.11"},
        {"inherit_path": False},
        {"extra_path_dirs": ["/opt/bin"]},
        {"required_tools": ["pytest", "git"]},
        {"env_vars": {"X": "1"}},
    ],
)
def test_a_changed_environment_changes_the_tag(change: dict[str, object]) -> None:
    changed = SPEC.model_copy(update=change)
    assert image_tag(changed, DOCKERFILE, BASE) != image_tag(SPEC, DOCKERFILE, BASE)


def test_a_changed_dockerfile_changes_the_tag() -> None:
    assert image_tag(SPEC, DOCKERFILE + b"USER pact\n", BASE) != image_tag(SPEC, DOCKERFILE, BASE)


def test_a_changed_base_image_changes_the_tag() -> None:
    assert image_tag(SPEC, DOCKERFILE, "python:3.11-slim") != image_tag(SPEC, DOCKERFILE, BASE)


def test_the_packaged_dockerfile_is_identical_to_the_repository_one() -> None:
    repo = (REPO / "sandbox_images" / "python" / "Dockerfile").read_bytes()
    packaged = (REPO / "pact_workers" / "sandbox" / "Dockerfile").read_bytes()
    assert packaged == repo
    assert dockerfile_bytes() == repo


def test_the_dockerfile_builds_from_a_base_image_argument_as_a_non_root_user() -> None:
    text = dockerfile_bytes().decode()
    assert "ARG BASE_IMAGE=python:3.11-slim" in text
    assert "FROM ${BASE_IMAGE}" in text
    assert "USER pact" in text and "--uid 10001" in text
    assert "LABEL pact-fleet.image=sandbox" in text


def test_the_base_image_is_read_from_the_environment_at_call_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(images.BASE_IMAGE_ENV, raising=False)
    assert default_base_image() == DEFAULT_BASE
    monkeypatch.setenv(images.BASE_IMAGE_ENV, "python:3.11-slim")
    assert default_base_image() == "python:3.11-slim"


def test_a_missing_image_is_a_permanent_failure() -> None:
    assert classify_error(SandboxImageMissing("no image")) is ErrorClass.PERMANENT
