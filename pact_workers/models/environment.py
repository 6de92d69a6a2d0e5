"""The execution environment for agents and the test harness (seed 000, 4.4)."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Mapping

from pydantic import BaseModel, ConfigDict, Field

from pact_workers.errors import EnvironmentSpecError

#: Variables passed through from the parent besides PATH; secrets never are.
PASSTHROUGH_VARS = ("HOME", "LANG", "LC_ALL", "TMPDIR", "TZ")

#: PATH when ``inherit_path`` is false, after ``extra_path_dirs``.
MINIMAL_PATH = "/usr/bin"


class EnvironmentSpec(BaseModel):
    """Standardised execution environment for the test harness and agents."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    python_path: str = Field(default="python3", description="Python interpreter command or path")
    inherit_path: bool = Field(default=True, description="Inherit PATH from the parent process")
    extra_path_dirs: list[str] = Field(default_factory=list, description="Additional PATH dirs")
    required_tools: list[str] = Field(
        default_factory=lambda: ["pytest"],
        description="Tools that must be available (checked before any work)",
    )
    env_vars: dict[str, str] = Field(
        default_factory=dict, description="Additional environment variables"
    )
    pytest_plugins: list[str] = Field(
        default_factory=list,
        description="pytest plugins the contract tests may use (e.g. asyncio); no other "
        "installed plugin is loaded into a verification",
    )

    def path_value(self, parent_env: Mapping[str, str] | None = None) -> str:
        """The PATH this spec gives a subprocess: extra dirs first, then parent or minimal."""
        parent = os.environ if parent_env is None else parent_env
        tail = parent.get("PATH", "") if self.inherit_path else MINIMAL_PATH
        parts = [*self.extra_path_dirs, *[p for p in tail.split(os.pathsep) if p]]
        return os.pathsep.join(dict.fromkeys(parts))

    def build_env(
        self, pythonpath: str, *, parent_env: Mapping[str, str] | None = None
    ) -> dict[str, str]:
        """Build the subprocess environment.

        Raises:
            EnvironmentSpecError: the interpreter or a required tool is not found;
                the message lists what is missing and how to fix it.
        """
        parent = os.environ if parent_env is None else parent_env
        env = {k: parent[k] for k in PASSTHROUGH_VARS if k in parent}
        env["PATH"] = self.path_value(parent)
        env.update(self.env_vars)
        env["PYTHONPATH"] = pythonpath
        if self.resolve_python(env["PATH"]) is None:
            raise EnvironmentSpecError(
                f"python interpreter {self.python_path!r} not found on PATH "
                f"({env['PATH']}); set environment.python_path in pact.yaml to an "
                "absolute path, or add its directory to environment.extra_path_dirs"
            )
        missing = self.validate_environment(parent_env=parent)
        if missing:
            raise EnvironmentSpecError(
                f"required tools not found on PATH: {', '.join(missing)}; install them "
                "or add their directory to environment.extra_path_dirs in pact.yaml"
            )
        return env

    def resolve_python(self, path: str | None = None) -> str | None:
        """The absolute path of the interpreter, or None when it cannot be found."""
        return shutil.which(self.python_path, path=path if path is not None else self.path_value())

    def missing_pytest_plugins(self, python: str) -> list[str]:
        """The ``pytest_plugins`` that ``python`` cannot load: neither the name of an
        installed plugin (a ``pytest11`` entry point, as ``pytest -p`` takes it) nor an
        importable module. Asked of the interpreter itself, in a subprocess.

        Raises:
            EnvironmentSpecError: the interpreter could not answer.
        """
        if not self.pytest_plugins:
            return []
        try:
            done = subprocess.run(
                [python, "-c", _PLUGIN_PROBE, *self.pytest_plugins],
                capture_output=True,
                text=True,
                timeout=60,
                env={**self.build_env(""), "PYTHONPATH": ""},
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise EnvironmentSpecError(
                f"{python} could not list its pytest plugins: {exc}"
            ) from None
        if done.returncode != 0:
            raise EnvironmentSpecError(
                f"{python} could not list its pytest plugins: {done.stderr.strip()[-300:]}"
            )
        return done.stdout.split()

    def validate_environment(self, *, parent_env: Mapping[str, str] | None = None) -> list[str]:
        """Return the required tools that are not available (empty: all present)."""
        path = self.path_value(parent_env)
        return [tool for tool in self.required_tools if shutil.which(tool, path=path) is None]


#: Prints each name given that is neither a pytest plugin's entry-point name nor an
#: importable module (run by the environment's interpreter).
_PLUGIN_PROBE = """
import importlib.util, sys
from importlib.metadata import entry_points
known = set()
for ep in entry_points(group="pytest11"):
    known.update((ep.name, ep.value.split(":")[0]))
for name in sys.argv[1:]:
    try:
        found = name in known or importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        found = False
    if not found:
        print(name)
"""
