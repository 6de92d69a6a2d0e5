"""The command agent: any command-line coding agent, run inside the sandbox.

The agent is an argv template (``pact.yaml``: ``agents.<role>.argv``), for example
``["claude", "-p", "Follow the instructions in {prompt_file}"]`` or
``["codex", "exec", "--cd", "{workspace}", "..."]``. Each attempt runs it once, in a
fresh workspace of the worker's sandbox (local or docker), and collects the files the
role must produce. Its workspace holds:

- ``prompt.md``: the role's rendered prompt (system, then this attempt), followed by a
  section that says where the inputs are and which files to write;
- ``inputs/<bundle>/...``: the role's input bundles as the scheduler assembled them
  (``spec``, ``contract``, ``dep_contracts``, ``deps_src``, ``test_cases``); the code
  author's and integrator's inputs never hold the contract tests;
- ``interface.json``: the component's contract, for every role but the contract author;
- the files of ``files_dir``, if configured: a directory on the worker copied into every
  workspace (the CLI's settings, tools, instructions such as ``AGENTS.md``).

Placeholders in the argv template: ``{prompt_file}`` (``prompt.md``), ``{workspace}``
(``.``: the command starts in its workspace), ``{role}``, ``{component}``, and the
sandbox's own ``{python}`` (the environment's interpreter). Anything else is left as is.

The agent request may use the network (``network``, default on); the harness's
verification that follows is a separate sandbox request that never does. Environment
variables of the worker reach the command only when the configuration names them
(``api_key_env`` and ``env_passthrough``), and only through that one request's
environment; their values are never logged and are masked in error messages.

A CLI agent reports no token counts, so every output carries an empty :class:`Usage`:
spend under ``budget_usd`` is not tracked for this backend.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

from pact_workers.agents.base import AgentOutput, AgentRequest
from pact_workers.agents.workspace import (
    CONTRACT_FILE,
    INPUTS_DIR,
    OUTPUTS,
    PROMPT_FILE,
    collected_path,
    prompt_text,
    served_role,
    what_to_write,
)
from pact_workers.artifacts import Bundle
from pact_workers.errors import (
    InputError,
    PermanentAgentError,
    SystemicAgentError,
    TransientAgentError,
)
from pact_workers.models.audit import AUDIT_FILE
from pact_workers.models.environment import EnvironmentSpec
from pact_workers.models.teachback import TEACHBACK_FILE
from pact_workers.models.work import Role, Usage
from pact_workers.sandbox.base import Sandbox, SandboxRequest, SandboxResult, safe_relpath

if TYPE_CHECKING:
    from pact_workers.agents.config import AgentConfig

__all__ = [
    "CONTRACT_FILE",
    "INPUTS_DIR",
    "OUTPUTS",
    "PROMPT_FILE",
    "SANDBOX_ENV",
    "CommandAgent",
    "prompt_text",
    "render_argv",
    "sandbox_from_env",
]

#: The worker's sandbox when the agent is built without one (``local`` or ``docker``).
SANDBOX_ENV = "PACT_SANDBOX"

_IMPLEMENTERS = frozenset({Role.CODE_AUTHOR, Role.INTEGRATOR})
#: Top-level workspace names ``files_dir`` may not provide: the agent's inputs and every
#: role's outputs (a file there would be collected as the agent's work).
_RESERVED = frozenset(
    {PROMPT_FILE, INPUTS_DIR, CONTRACT_FILE, "src", "tests", TEACHBACK_FILE, AUDIT_FILE}
)
_PLACEHOLDER = re.compile(r"\{(prompt_file|workspace|role|component)\}")
#: Failure output of a command that may succeed later: the network, a provider's
#: rate limit or outage. Anything else is the agent failing at the task.
_TRANSIENT_OUTPUT = re.compile(
    r"connection (?:reset|refused|aborted|closed|error)|timed out|timeout"
    r"|temporary failure|temporarily unavailable|name resolution|network is unreachable"
    r"|rate.?limit|too many requests|overloaded|\b(?:429|502|503|504)\b"
    r"|ECONNRESET|ECONNREFUSED|ETIMEDOUT|EAI_AGAIN",
    re.IGNORECASE,
)
#: How much of the command's output an error message quotes (its tail).
TAIL_CHARS = 2000
_MASK = "***"


class CommandAgent:
    """Runs a command-line coding agent in a sandbox; see the module docstring.

    Args:
        argv: the command template; placeholders are filled in per attempt.
        sandbox: where the command runs; default: built on first use from
            ``PACT_SANDBOX`` (:func:`sandbox_from_env`).
        network: whether the command may use the network.
        timeout_s: the command is killed after this long (a transient failure).
        files_dir: a directory whose files are copied into every workspace.
        env_passthrough: names of worker environment variables the command gets.
        model: what outputs report as their model (default ``command:<argv[0]>``).

    Raises:
        InputError: an empty argv.
    """

    name = "command"

    def __init__(
        self,
        argv: Sequence[str],
        *,
        sandbox: Sandbox | None = None,
        network: bool = True,
        timeout_s: float = 1800.0,
        files_dir: Path | str | None = None,
        env_passthrough: Sequence[str] = (),
        model: str = "",
    ) -> None:
        if not argv or not argv[0]:
            raise InputError(
                "the command agent needs a command: set `argv` for the role in pact.yaml "
                '(agents.default.argv, e.g. ["claude", "-p", "Do what {prompt_file} says"])'
            )
        self.argv = list(argv)
        self.network = network
        self.timeout_s = timeout_s
        self.files_dir = Path(files_dir).expanduser() if files_dir else None
        self.env_passthrough = tuple(dict.fromkeys(env_passthrough))
        self.model = model or f"command:{PurePosixPath(self.argv[0]).name}"
        self._sandbox = sandbox
        self._lock = threading.Lock()

    @classmethod
    def from_config(cls, config: AgentConfig, *, sandbox: Sandbox | None = None) -> CommandAgent:
        """The agent one role's configuration describes; nothing is contacted yet."""
        names = [*([config.api_key_env] if config.api_key_env else [])]
        names += config.env_passthrough
        return cls(
            config.argv,
            sandbox=sandbox,
            network=config.network,
            timeout_s=config.timeout_s,
            files_dir=config.files_dir,
            env_passthrough=names,
            model=config.model,
        )

    @property
    def sandbox(self) -> Sandbox:
        """The sandbox commands run in, built from ``PACT_SANDBOX`` on first use."""
        with self._lock:
            if self._sandbox is None:
                self._sandbox = sandbox_from_env()
            return self._sandbox

    # -- one attempt ---------------------------------------------------------------------

    def produce(self, request: AgentRequest) -> AgentOutput:
        """Run the command for ``request`` and return the files the role must produce.

        Raises:
            TransientAgentError: the command timed out, or failed the way a network or
                an overloaded provider makes it fail.
            PermanentAgentError: it failed otherwise, or wrote none of what the role
                must produce.
            SystemicAgentError: this worker cannot run it (``files_dir`` missing,
                ``PACT_SANDBOX`` unknown).
        """
        secrets = self._secrets()
        sandbox_request = self.sandbox_request(request, secrets=secrets)
        result = self.sandbox.run(sandbox_request)
        where = f"component {request.component_id!r} ({request.role.value})"
        command = self.argv[0]
        if result.timed_out:
            raise TransientAgentError(
                f"the agent command {command!r} ran past its {self.timeout_s:g} s timeout for "
                f"{where} and was killed (raise timeout_s in pact.yaml if it needs longer)"
                f"{_tail(result, secrets)}"
            )
        if result.exit_code != 0:
            tail = _tail(result, secrets)
            message = f"the agent command {command!r} exited with {result.exit_code} for {where}"
            if result.oom_killed:
                raise PermanentAgentError(f"{message}: out of memory{tail}")
            if _TRANSIENT_OUTPUT.search(tail):
                raise TransientAgentError(f"{message}, apparently a network problem{tail}")
            raise PermanentAgentError(f"{message}{tail}")
        files = _drop_dependency_copies(result.files, request)
        if not files:
            expected = collected_path(request)
            what = f"{expected}/" if not expected.endswith(".json") else expected
            raise PermanentAgentError(
                f"the agent command {command!r} exited 0 but wrote no {what} in its workspace "
                f"for {where}; the {request.role.value} must write {what_to_write(request)}"
                f"{_tail(result, secrets)}"
            )
        return AgentOutput(files=files, usage=Usage(), model=self.model)

    def sandbox_request(
        self, request: AgentRequest, *, secrets: Mapping[str, str] | None = None
    ) -> SandboxRequest:
        """The sandbox request for ``request`` (``secrets``: variables for its env)."""
        role = served_role(request)
        base = getattr(request, "environment", None) or EnvironmentSpec()
        environment = base.model_copy(
            update={
                "required_tools": _checkable_tool(self.argv[0]),
                "env_vars": {**base.env_vars, **(secrets or {})},
            }
        )
        return SandboxRequest(
            command=render_argv(self.argv, role=role, component=request.component_id),
            files=self.workspace(request),
            environment=environment,
            # Where a CLI agent that runs its code finds it and its dependencies.
            pythonpath=["src", f"{INPUTS_DIR}/deps_src/src"] if role in _IMPLEMENTERS else (),
            timeout_s=self.timeout_s,
            collect=[collected_path(request)],
            network=self.network,
        )

    def workspace(self, request: AgentRequest) -> Bundle:
        """The files the command starts with (workspace-relative paths)."""
        role = served_role(request)
        files: Bundle = {PROMPT_FILE: prompt_text(request).encode()}
        for bundle, contents in sorted(request.inputs.items()):
            if role in _IMPLEMENTERS and (bundle == "tests" or any(_is_test(p) for p in contents)):
                # The scheduler never sends them; refuse rather than leak a bug's result.
                raise PermanentAgentError(
                    f"component {request.component_id!r}: the {role.value}'s inputs hold test "
                    f"files (bundle {bundle!r}); the adversarial split forbids showing them"
                )
            for path, data in contents.items():
                files[f"{INPUTS_DIR}/{safe_relpath(bundle)}/{safe_relpath(path)}"] = data
        contract = request.inputs.get("contract", {}).get(CONTRACT_FILE)
        if contract is not None and role is not Role.CONTRACT_AUTHOR:
            files[CONTRACT_FILE] = contract
        files.update(self._extra_files())
        return files

    # -- helpers -------------------------------------------------------------------------

    def _secrets(self) -> dict[str, str]:
        """The named variables this worker has (a missing one is left to the command)."""
        return {name: os.environ[name] for name in self.env_passthrough if name in os.environ}

    def _extra_files(self) -> Bundle:
        if self.files_dir is None:
            return {}
        root = self.files_dir
        if not root.is_dir():
            raise SystemicAgentError(
                f"the command agent's files_dir {root} is not a directory on this worker; "
                "create it there (every worker needs it) or remove files_dir from pact.yaml"
            )
        files: Bundle = {}
        for path in sorted(root.rglob("*")):
            if not path.is_file() or "__pycache__" in path.parts:
                continue
            rel = safe_relpath(path.relative_to(root).as_posix())
            if rel.split("/")[0] in _RESERVED:
                raise SystemicAgentError(
                    f"files_dir {root}: {rel!r} would shadow the agent's inputs or outputs "
                    f"({', '.join(sorted(_RESERVED))} are reserved); move it into a subdirectory"
                )
            files[rel] = path.read_bytes()
        return files


def render_argv(template: Sequence[str], *, role: Role, component: str) -> list[str]:
    """Fill in ``{prompt_file}``, ``{workspace}``, ``{role}`` and ``{component}``."""
    values = {
        "prompt_file": PROMPT_FILE,
        "workspace": ".",
        "role": role.value,
        "component": component,
    }
    # One pass: a value is never itself searched for placeholders.
    return [_PLACEHOLDER.sub(lambda m: values[m.group(1)], arg) for arg in template]


def sandbox_from_env() -> Sandbox:
    """The sandbox ``PACT_SANDBOX`` names (``local`` when unset), read now.

    Raises:
        SystemicAgentError: an unknown name (every attempt on this worker would fail).
    """
    name = os.environ.get(SANDBOX_ENV) or "local"
    if name == "local":
        from pact_workers.sandbox.local import LocalSandbox

        return LocalSandbox()
    if name == "docker":
        from pact_workers.sandbox.docker import DockerSandbox

        # No sweep: the worker's own sandbox sweeps orphans on connect; a second sweep in
        # every worker process only races with its siblings' containers as they go.
        return DockerSandbox.from_env(sweep=False)
    raise SystemicAgentError(
        f"{SANDBOX_ENV}={name!r} names no sandbox the command agent can use; set it to "
        "local or docker on this worker"
    )


def _checkable_tool(command: str) -> list[str]:
    """The command as a required tool when the sandbox can look it up before running.

    A placeholder (``{python}``) or a path inside the workspace (``./tool``, shipped with
    ``files_dir``) cannot be checked in an empty sandbox, so it is left to the run.
    """
    if "{" in command or ("/" in command and not command.startswith("/")):
        return []
    return [command]


def _is_test(path: str) -> bool:
    parts = PurePosixPath(path).parts
    name = parts[-1] if parts else ""
    return (
        "tests" in parts[:-1]
        or name == "conftest.py"
        or (name.endswith(".py") and (name.startswith("test_") or name.endswith("_test.py")))
    )


def _drop_dependency_copies(files: Mapping[str, bytes], request: AgentRequest) -> Bundle:
    """The outputs without unchanged copies of dependency sources.

    An agent that copies its dependencies into ``src/`` to run its code leaves them
    there; the harness adds the real ones itself and would reject the duplicates.
    """
    deps = request.inputs.get("deps_src", {})
    return {path: data for path, data in files.items() if deps.get(path) != data}


def _tail(result: SandboxResult, secrets: Mapping[str, str]) -> str:
    """``: <stderr tail>`` (or stdout's when stderr is empty), secrets masked."""
    text = result.stderr.strip() or result.stdout.strip()
    for value in secrets.values():
        if value:  # masked before the cut, so that no part of a value is left
            text = text.replace(value, _MASK)
    text = text[-TAIL_CHARS:]
    return f":\n{text}" if text else " (no output)"
