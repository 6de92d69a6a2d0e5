"""What a command agent finds in its workspace and must leave there: the prompt file
(the role's prompt, then where the inputs are and which files to write), and the one
path collected per role (or ``teachback.json`` when a teachback is asked for).

Rules: every role the command agent serves has exactly one output path; a role
without one is refused (a permanent error: no attempt could succeed). How the
workspace is filled and run is :class:`~pact_workers.agents.command.CommandAgent`'s.
"""

from __future__ import annotations

from pact_workers.agents.base import AgentRequest
from pact_workers.agents.roles import render_prompt
from pact_workers.errors import PermanentAgentError
from pact_workers.models.audit import AUDIT_FILE
from pact_workers.models.teachback import TEACHBACK_FILE
from pact_workers.models.work import Role

PROMPT_FILE = "prompt.md"
INPUTS_DIR = "inputs"
CONTRACT_FILE = "interface.json"

#: What each role must leave in its workspace: the one path collected after the run.
OUTPUTS: dict[Role, str] = {
    Role.CONTRACT_AUTHOR: CONTRACT_FILE,
    Role.TEST_AUTHOR: "tests",
    Role.CODE_AUTHOR: "src",
    Role.INTEGRATOR: "src",
    Role.AUDITOR: AUDIT_FILE,
}
#: What each role is told to write (the prompt's last section).
_WRITE: dict[Role, str] = {
    Role.CONTRACT_AUTHOR: (
        "`interface.json` in the workspace root: the contract, one JSON object matching "
        "the ComponentContract schema"
    ),
    Role.TEST_AUTHOR: (
        "the pytest module `tests/contract_test.py` (other files under `tests/` are kept "
        "too; `tests/contract_test_suite.json` may list the cases, as a ContractTestSuite)"
    ),
    Role.CODE_AUTHOR: "the implementation under `src/`, its main module `src/{component}.py`",
    Role.INTEGRATOR: (
        "the integration module `src/{component}.py`, which imports the children (never "
        "copies them)"
    ),
    Role.AUDITOR: (
        "`audit.json` in the workspace root: your verdict, one JSON object "
        '`{{"approved": ..., "findings": [...]}}`'
    ),
}
#: What an agent asked for a teachback writes instead of its role's files.
_WRITE_TEACHBACK = (
    "`teachback.json` in the workspace root, and nothing else yet: your teachback, one "
    "JSON object as the section above describes (the work is asked for once it is approved)"
)


def prompt_text(request: AgentRequest) -> str:
    """``prompt.md``: the role's prompt, and how to answer with files instead of JSON."""
    prompt = render_prompt(request)
    role = served_role(request)
    bundles = ", ".join(f"`{INPUTS_DIR}/{name}/`" for name in sorted(request.inputs)) or "none"
    lines = [
        "## Working in this workspace",
        "You run as a command-line agent in your own workspace (the current directory). "
        "Do not answer with JSON on standard output: write files.",
        f"- Your inputs, as files: {bundles}.",
    ]
    if role is not Role.CONTRACT_AUTHOR and "contract" in request.inputs:
        lines.append(f"- The component's contract is also at `{CONTRACT_FILE}`.")
    lines.append(f"- Write {what_to_write(request)}. Nothing else you write is kept.")
    lines.append("- Exit with status 0 when the files are written, non-zero if you cannot.")
    return f"{prompt.system.rstrip()}\n\n{prompt.user.rstrip()}\n\n" + "\n".join(lines) + "\n"


def collected_path(request: AgentRequest) -> str:
    """The one workspace path collected after the command: a teachback, or the role's."""
    return TEACHBACK_FILE if request.teachback else OUTPUTS[served_role(request)]


def what_to_write(request: AgentRequest) -> str:
    """What the agent is told to write: a teachback, or its role's files."""
    if request.teachback:
        return _WRITE_TEACHBACK
    return _WRITE[served_role(request)].format(component=request.component_id)


def served_role(request: AgentRequest) -> Role:
    """The request's role, when the command agent can serve it."""
    if request.role not in OUTPUTS:
        raise PermanentAgentError(f"the command agent cannot serve role {request.role.value!r}")
    return request.role
