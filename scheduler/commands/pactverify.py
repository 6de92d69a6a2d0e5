"""``pact verify``: re-verify a Pact project's implementations against its contract tests.

Reads the Pact project as Pact wrote it (never writing to it), runs every component's
contract tests again in the sandbox asked for, and returns per component the counts
Pact recorded and the counts reproduced here.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from pact_workers.errors import InputError
from pact_workers.models.environment import EnvironmentSpec
from scheduler.commands.agents import make_sandbox
from scheduler.pactimport import Reproduction, read_pact_project, reverify, verifiable

__all__ = ["verify_pact"]


def verify_pact(
    *,
    path: Path,
    sandbox_name: str = "local",
    timeout_s: float = 300.0,
    on_component: Callable[[Reproduction], None] | None = None,
) -> list[Reproduction]:
    """Re-verify every component of the Pact project at ``path`` that has contract tests,
    an implementation and recorded results.

    Raises:
        InputError: ``path`` is no Pact project, a file of it cannot be read, no
            component can be verified, or the sandbox is unknown.
    """
    if timeout_s <= 0:
        raise InputError(f"--timeout must be above 0 seconds, got {timeout_s:g}")
    project = read_pact_project(path)
    components = verifiable(project)
    if not components:
        raise InputError(
            f"{project.pact_dir}: no component has contract tests "
            "(contracts/<c>/tests/), an implementation (implementations/<c>/src/) and "
            "recorded results (implementations/<c>/test_results.json) to verify"
        )
    sandbox = make_sandbox(sandbox_name)
    environment = EnvironmentSpec()
    if sandbox_name == "local":
        missing = environment.validate_environment()
        if missing:
            raise InputError(f"required tools not found on PATH: {', '.join(missing)}")
    return reverify(
        project,
        sandbox=sandbox,
        environment=environment,
        timeout_s=timeout_s,
        components=components,
        on_component=on_component,
    )
