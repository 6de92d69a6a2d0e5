"""What each role is asked and what it must answer: versioned prompts, output schemas.

A prompt has a stable prefix (the role's instructions, which prompt caching keeps
warm) and a per-attempt part (the component, the contracts it may see, the feedback
of a failed attempt). An answer is validated against the role's pydantic schema and
turned into the files the harness checks. What a role may see is decided by what the
scheduler put in its inputs; the code author's inputs never hold test files.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from pact_workers.agents.base import AgentRequest
from pact_workers.agents.context import build_code_agent_context
from pact_workers.artifacts import Bundle
from pact_workers.errors import PermanentAgentError
from pact_workers.models.audit import AUDIT_FILE, AuditVerdict
from pact_workers.models.contract import ComponentContract
from pact_workers.models.interview import InterviewerOutput
from pact_workers.models.teachback import TEACHBACK_FILE, Teachback
from pact_workers.models.testing import ContractTestSuite, TestCase
from pact_workers.models.tree import DecompositionTree
from pact_workers.models.work import Phase, Role

#: The prompt version of a role that :data:`ROLE_PROMPT_VERSIONS` does not name.
PROMPT_VERSION = "v1"
#: Roles whose prompt moved on: the contract author states the validation and quality
#: rules (seed 000, sections 2 and 5) since v2.
ROLE_PROMPT_VERSIONS: dict[Role, str] = {Role.CONTRACT_AUTHOR: "v2"}
#: Roles shown the contract as the tiered code-author context (test case names, no code).
_SEES_TEST_CASES = frozenset({Role.CODE_AUTHOR, Role.TRACE_ANALYST})


class TestSuiteOutput(BaseModel):
    """A test author's answer: the pytest module and the cases it covers."""

    __test__ = False
    model_config = ConfigDict(extra="forbid")

    test_code: str = Field(description="The complete pytest module tests/contract_test.py")
    test_cases: list[TestCase] = Field(
        default_factory=list, description="One entry per test function, for the code author"
    )


class ImplementationOutput(BaseModel):
    """A code author's or integrator's answer: source files under src/."""

    model_config = ConfigDict(extra="forbid")

    files: dict[str, str] = Field(
        description="Python source files by path relative to src/, e.g. {'<component>.py': ...}"
    )


class TraceDiagnosis(BaseModel):
    """A trace analyst's answer: why an implementation failed and what to change."""

    model_config = ConfigDict(extra="forbid")

    summary: str = Field(min_length=1, description="One sentence: what went wrong")
    root_cause: str = Field(min_length=1, description="The specific mistake, file and function")
    suggested_fix: str = Field(min_length=1, description="What to change so the tests pass")
    files: list[str] = Field(default_factory=list, description="Implementation files to change")

    def as_text(self) -> str:
        where = f"\nFiles: {', '.join(self.files)}" if self.files else ""
        return (
            f"Summary: {self.summary}\nRoot cause: {self.root_cause}\n"
            f"Suggested fix: {self.suggested_fix}{where}"
        )


#: Where a trace analyst's answer is put among the files an agent returns.
DIAGNOSIS_FILE = "diagnosis.json"

OUTPUT_MODELS: dict[Role, type[BaseModel]] = {
    Role.CONTRACT_AUTHOR: ComponentContract,
    Role.TEST_AUTHOR: TestSuiteOutput,
    Role.CODE_AUTHOR: ImplementationOutput,
    Role.INTEGRATOR: ImplementationOutput,
    Role.TRACE_ANALYST: TraceDiagnosis,
    # Reviews a verified attempt before promotion (``gates: blocking``, score >= 7).
    Role.AUDITOR: AuditVerdict,
    # The planning roles (``pact plan``): the interview, then the decomposition tree.
    Role.INTERVIEWER: InterviewerOutput,
    Role.DECOMPOSER: DecompositionTree,
}


class OutputSchemaError(PermanentAgentError):
    """The model's answer does not match the role's schema (after correction attempts)."""


@dataclass(frozen=True)
class Prompt:
    system: str  # stable per role and version: the cacheable prefix
    user: str  # this attempt
    version: str


def output_schema(role: Role) -> dict[str, Any]:
    return OUTPUT_MODELS[role].model_json_schema()


def request_model(request: AgentRequest) -> type[BaseModel]:
    """What ``request`` must be answered with: its role's output, or a teachback."""
    return Teachback if request.teachback else OUTPUT_MODELS[request.role]


def request_schema(request: AgentRequest) -> dict[str, Any]:
    return request_model(request).model_json_schema()


#: What a teachback request adds to the prompt (the gates' blocking teachback).
TEACHBACK_SECTION = """## First, a teachback (do not do the work yet)
Before any work on this component, restate your task as one JSON object (a Teachback):
- `component_id`: this component's id;
- `produces`: what you will produce (files, modules, what they export);
- `functions`: the name of EVERY function of the contract you will implement;
- `error_cases`: EVERY error case of every function, as `{"function": ..., "name": ...}`
  with the names the contract gives;
- `uses`: the other components of the tree your work will use (only its dependencies);
- `assumptions`: what you assume that the contract does not say.
It is checked mechanically against the contract: anything missing or outside the
component's scope is sent back as corrections. The work itself is asked for once the
teachback is approved."""


def prompt_version(role: Role) -> str:
    """The prompt version a role is given (part of what identifies its work)."""
    return ROLE_PROMPT_VERSIONS.get(role, PROMPT_VERSION)


def load_template(role: Role, version: str | None = None) -> str:
    chosen = version or prompt_version(role)
    ref = resources.files("pact_workers.agents") / "prompts" / f"{role.value}.{chosen}.md"
    return ref.read_text(encoding="utf-8")


def render_prompt(request: AgentRequest, *, version: str | None = None) -> Prompt:
    """The role's instructions, and this attempt's material as plain sections."""
    version = version or prompt_version(request.role)
    system = load_template(request.role, version)
    sections = [f"# Component {request.component_id}"]
    spec = request.inputs.get("spec", {}).get("component.json")
    if spec:
        sections.append("## Specification\n" + spec.decode())
    interview = request.inputs.get("interview", {}).get("interview.json")
    if interview:
        sections.append(interview_section(interview))
    contract_files = request.inputs.get("contract", {})
    contract_raw = contract_files.get("interface.json")
    if request.role in _SEES_TEST_CASES and contract_raw is not None:
        suite = ContractTestSuite.model_validate_json(
            request.inputs.get("test_cases", {}).get("suite.json", b'{"component_id": "x"}')
        ).model_copy(update={"component_id": request.component_id})
        sections.append(
            build_code_agent_context(
                ComponentContract.model_validate_json(contract_raw),
                suite,
                lessons=_lessons(request),
            )
        )
    elif contract_raw is not None:
        sections.append("## Contract (interface.json)\n" + contract_raw.decode())
    for path, data in sorted(request.inputs.get("dep_contracts", {}).items()):
        sections.append(f"## Contract of dependency {path.split('/')[0]}\n{data.decode()}")
    for path, data in sorted(request.inputs.get("deps_src", {}).items()):
        sections.append(f"## Dependency source {path}\n```python\n{data.decode()}\n```")
    if request.feedback:
        sections.append(feedback_section(request))
    if request.role is Role.TRACE_ANALYST:
        sections.append("Diagnose why the last attempt failed; do not write the implementation.")
    for path, data in sorted(request.inputs.get("output", {}).items()):
        # The auditor's subject: the attempt the harness accepted...
        sections.append(f"## Attempt under review: {path}\n```python\n{data.decode()}\n```")
    for _, data in sorted(request.inputs.get("teachback", {}).items()):
        # ... or the teachback the checker approved, before any work.
        sections.append(f"## Teachback under review\n```json\n{data.decode()}\n```")
    if request.teachback:
        sections.append(TEACHBACK_SECTION)
    return Prompt(system=system, user="\n\n".join(sections), version=version)


def _lessons(request: AgentRequest) -> list[str]:
    """What earlier runs' retrospectives taught (the scheduler's ``lessons`` input)."""
    raw = request.inputs.get("lessons", {}).get("lessons.json")
    if raw is None:
        return []
    try:
        loaded = json.loads(raw)
    except ValueError:
        return []
    return [str(x) for x in loaded] if isinstance(loaded, list) else []


def interview_section(raw: bytes) -> str:
    """The task's answered interview (``pact plan``): every question with the answer in
    use, then the assumptions, risks and ambiguities the interviewer saw."""
    doc = json.loads(raw)
    lines = ["## The task's interview (answered before decomposition)"]
    for question, answer in doc.get("user_answers", {}).items():
        lines.append(f"- Q: {question}\n  A: {answer}")
    for title in ("assumptions", "risks", "ambiguities"):
        if doc.get(title):
            lines.append(f"### {title.capitalize()}")
            lines.extend(f"- {item}" for item in doc[title])
    return "\n".join(lines)


def feedback_section(request: AgentRequest) -> str:
    """What failed last time: the failing tests' names and messages (never their source),
    what each failed attempt wrote or changed, and the trace analyst's diagnosis."""
    lines = ["## Your previous attempt failed verification"]
    for note in request.feedback:
        lines.append(f"Attempt {note.attempt}: {note.summary}")
        for test_id, message in note.failing_tests[:20]:
            first = message.strip().splitlines()[0] if message.strip() else "(no message)"
            lines.append(f"- {test_id}: {first[:300]}")
    lines.extend(changes_lines(request.previous_outputs))
    if request.diagnosis:
        lines.append("### Diagnosis of the failure (trace analyst)\n" + request.diagnosis.strip())
    if request.role is not Role.TRACE_ANALYST:
        lines.append("Fix it so that these pass; keep what already worked.")
    return "\n".join(lines)


#: Lines of diff shown per failed attempt; the rest is cut (the model needs the gist).
MAX_DIFF_LINES = 300


def changes_lines(outputs: Mapping[int, Bundle]) -> list[str]:
    """Per failed attempt, oldest first: the files it wrote (the first), then a unified
    diff against the attempt before it, so that a retry sees what was already tried."""
    lines: list[str] = []
    before: Bundle = {}
    previous = 0
    for attempt in sorted(outputs):
        files = outputs[attempt]
        diff = bundle_diff(before, files)
        if len(diff) > MAX_DIFF_LINES:
            cut = len(diff) - MAX_DIFF_LINES
            diff = [*diff[:MAX_DIFF_LINES], f"... ({cut} more lines not shown)"]
        if previous:
            title = f"### What attempt {attempt} changed (against attempt {previous})"
        else:
            title = f"### What attempt {attempt} wrote"
        body = (
            "\n".join(diff) if diff else "(the same files as the attempt before: nothing changed)"
        )
        lines.append(f"{title}\n```diff\n{body}\n```")
        before, previous = files, attempt
    return lines


def bundle_diff(old: Bundle, new: Bundle) -> list[str]:
    """A unified diff (lines without newlines) from ``old`` to ``new``, file by file."""
    out: list[str] = []
    for path in sorted(set(old) | set(new)):
        a = _text_lines(old.get(path))
        b = _text_lines(new.get(path))
        if a == b:
            continue
        out.extend(
            difflib.unified_diff(
                a,
                b,
                fromfile=f"a/{path}" if path in old else "/dev/null",
                tofile=f"b/{path}" if path in new else "/dev/null",
                lineterm="",
                n=2,
            )
        )
    return out


def _text_lines(data: bytes | None) -> list[str]:
    if data is None:
        return []
    return data.decode("utf-8", errors="replace").splitlines()


def files_from_output(request: AgentRequest, data: Any) -> Bundle:
    """Validate an answer against the role's schema and turn it into files.

    Raises:
        OutputSchemaError: naming what is wrong, in words a correction prompt can use.
    """
    model = request_model(request)
    try:
        answer = model.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'answer'}: {e['msg']}"
            for e in exc.errors()[:10]
        )
        raise OutputSchemaError(
            f"the answer does not match the {model.__name__} schema: {problems}"
        ) from exc
    if isinstance(answer, ComponentContract):
        if answer.component_id != request.component_id:
            raise OutputSchemaError(
                f"the contract names component {answer.component_id!r}, expected "
                f"{request.component_id!r}"
            )
        return {"interface.json": json.dumps(answer.model_dump(mode="json"), indent=2).encode()}
    if isinstance(answer, TestSuiteOutput):
        suite = ContractTestSuite(
            component_id=request.component_id,
            test_cases=answer.test_cases,
            generated_code=answer.test_code,
        )
        return {
            "tests/contract_test.py": answer.test_code.encode(),
            "tests/contract_test_suite.json": suite.model_dump_json(indent=2).encode(),
        }
    if isinstance(answer, TraceDiagnosis):
        return {DIAGNOSIS_FILE: answer.model_dump_json(indent=2).encode()}
    if isinstance(answer, Teachback):
        if answer.component_id != request.component_id:
            raise OutputSchemaError(
                f"the teachback restates component {answer.component_id!r}, expected "
                f"{request.component_id!r}"
            )
        return {TEACHBACK_FILE: answer.model_dump_json(indent=2).encode()}
    if isinstance(answer, AuditVerdict):
        return {AUDIT_FILE: answer.model_dump_json(indent=2).encode()}
    if isinstance(answer, InterviewerOutput):
        return {"interview.json": answer.model_dump_json(indent=2).encode()}
    if isinstance(answer, DecompositionTree):
        return {"tree.json": json.dumps(answer.model_dump(mode="json"), indent=2).encode()}
    assert isinstance(answer, ImplementationOutput)
    if not answer.files:
        raise OutputSchemaError("the answer has no files")
    return {f"src/{path.lstrip('/')}": text.encode() for path, text in answer.files.items()}


def phase_role(phase: Phase) -> Role:
    from pact_workers.models.work import ROLE_FOR_PHASE

    return ROLE_FOR_PHASE[phase]
