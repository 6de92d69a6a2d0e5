"""Role prompts and schemas, retry feedback, the trace analyst, and the agent factory.

The backends here are in-memory fakes of :class:`LLMBackend` that record each prompt;
the HTTP backends themselves are tested against local stand-in servers elsewhere.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import pytest

from pact_workers.agents.base import AgentRequest
from pact_workers.agents.factory import (
    AgentsSettings,
    RoutedAgent,
    agent_options,
    build_agent,
)
from pact_workers.agents.llm import Completion, StructuredAgent
from pact_workers.agents.pricing import Price
from pact_workers.agents.roles import (
    MAX_DIFF_LINES,
    OUTPUT_MODELS,
    PROMPT_VERSION,
    Prompt,
    bundle_diff,
    load_template,
    output_schema,
    render_prompt,
)
from pact_workers.errors import InputError, TransientAgentError
from pact_workers.models.work import FailureNote, Phase, Role, Usage
from tests.conftest import REPO

CONTRACT = (REPO / "scheduler/examples/calculator/replay/lexer/interface.json").read_bytes()
FAILED = FailureNote(
    attempt=1,
    summary="2 of 5 tests failed",
    failing_tests=[
        ("contract_test.py::test_negative_numbers", "AssertionError: expected -1 got 1"),
        ("contract_test.py::test_empty", "IndexError: list index out of range\nmore"),
    ],
    output="sha256:" + "0" * 64,
)
FIRST = {"src/lexer.py": b"def tokenize(text):\n    return text.split()\n"}
SECOND = {"src/lexer.py": b"def tokenize(text):\n    return [t for t in text.split()]\n"}


def retry_request(role: Role = Role.CODE_AUTHOR, **changes: Any) -> AgentRequest:
    fields: dict[str, Any] = {
        "run_id": "r",
        "component_id": "lexer",
        "phase": Phase.IMPLEMENT,
        "role": role,
        "attempt": 3,
        "inputs": {"contract": {"interface.json": CONTRACT}},
        "feedback": (FAILED, FAILED.model_copy(update={"attempt": 2})),
        "previous_outputs": {1: FIRST, 2: SECOND},
    }
    fields.update(changes)
    return AgentRequest(**fields)


@dataclass
class FakeBackend:
    """An LLMBackend that answers from a list and records the prompts it was sent."""

    answers: list[Any]
    name: str = "fake"
    model: str = "fake-model"
    usage: Usage = field(default_factory=lambda: Usage(input_tokens=10, cost_usd=0.5))
    prompts: list[tuple[Role, Prompt]] = field(default_factory=list)

    def complete(
        self, prompt: Prompt, *, role: Role, schema: dict[str, Any], correction: str | None = None
    ) -> Completion:
        self.prompts.append((role, prompt))
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return Completion(data=answer, usage=self.usage)


DIAGNOSIS = {
    "summary": "negative numbers lose their sign",
    "root_cause": "tokenize in src/lexer.py splits on spaces and drops the '-' prefix",
    "suggested_fix": "treat a '-' before a digit as part of the number",
    "files": ["src/lexer.py"],
}
IMPLEMENTATION = {"files": {"lexer.py": "def tokenize(text):\n    return []\n"}}


def routed(author: FakeBackend, analyst: FakeBackend | None) -> RoutedAgent:
    agents: dict[Role, Any] = {Role.CODE_AUTHOR: StructuredAgent(author)}
    if analyst is not None:
        agents[Role.TRACE_ANALYST] = StructuredAgent(analyst)
    return RoutedAgent(agents, name="fake")


# -- prompts and schemas ------------------------------------------------------------------


@pytest.mark.parametrize("role", list(Role))
def test_every_role_has_a_versioned_template_and_an_output_schema(role: Role) -> None:
    assert PROMPT_VERSION == "v1"
    assert len(load_template(role)) > 200
    assert output_schema(role)["type"] == "object"
    assert role in OUTPUT_MODELS


def test_a_retry_prompt_names_the_failing_tests_and_shows_what_each_attempt_changed() -> None:
    prompt = render_prompt(retry_request()).user
    assert "contract_test.py::test_negative_numbers: AssertionError: expected -1 got 1" in prompt
    # Only the first line of a message: never a traceback's worth of test internals.
    assert "IndexError: list index out of range" in prompt and "more" not in prompt
    assert "### What attempt 1 wrote" in prompt and "+    return text.split()" in prompt
    assert "### What attempt 2 changed (against attempt 1)" in prompt
    assert "-    return text.split()\n+    return [t for t in text.split()]" in prompt


def test_an_attempt_that_changed_nothing_is_said_to_have_changed_nothing() -> None:
    prompt = render_prompt(retry_request(previous_outputs={1: FIRST, 2: FIRST})).user
    assert "(the same files as the attempt before: nothing changed)" in prompt


def test_a_long_diff_is_cut_and_says_how_much_was_left_out() -> None:
    big = {"src/lexer.py": "".join(f"x{i} = {i}\n" for i in range(1000)).encode()}
    prompt = render_prompt(retry_request(previous_outputs={1: big})).user
    assert f"x{MAX_DIFF_LINES - 10} = " in prompt and "x999 = 999" not in prompt
    assert "more lines not shown" in prompt


def test_bundle_diff_covers_added_changed_and_removed_files() -> None:
    diff = bundle_diff({"a.py": b"1\n", "gone.py": b"x\n"}, {"a.py": b"2\n", "new.py": b"y\n"})
    text = "\n".join(diff)
    assert "--- a/a.py" in text and "-1" in text and "+2" in text
    assert "--- a/gone.py\n+++ /dev/null" in text
    assert "--- /dev/null\n+++ b/new.py" in text


def test_a_first_attempt_has_no_feedback_section() -> None:
    prompt = render_prompt(retry_request(attempt=1, feedback=(), previous_outputs={})).user
    assert "previous attempt" not in prompt


# -- the trace analyst --------------------------------------------------------------------


def test_the_trace_analyst_diagnoses_a_failed_implementation_before_the_retry() -> None:
    author = FakeBackend([IMPLEMENTATION])
    analyst = FakeBackend([DIAGNOSIS], usage=Usage(input_tokens=7, cost_usd=0.25))
    output = routed(author, analyst).produce(retry_request())
    ((role, analyst_prompt),) = analyst.prompts
    assert role is Role.TRACE_ANALYST
    # The analyst sees the failures and what was tried, and is told not to implement.
    assert "test_negative_numbers" in analyst_prompt.user
    assert "### What attempt 2 changed" in analyst_prompt.user
    assert "do not write the implementation" in analyst_prompt.user
    ((_, author_prompt),) = author.prompts
    assert "### Diagnosis of the failure (trace analyst)" in author_prompt.user
    assert "treat a '-' before a digit as part of the number" in author_prompt.user
    assert output.files == {"src/lexer.py": b"def tokenize(text):\n    return []\n"}
    # Both calls count for the attempt.
    assert output.usage.input_tokens == 17 and output.usage.cost_usd == pytest.approx(0.75)


def test_no_diagnosis_is_asked_for_on_a_first_attempt() -> None:
    author = FakeBackend([IMPLEMENTATION])
    analyst = FakeBackend([])
    routed(author, analyst).produce(retry_request(attempt=1, feedback=(), previous_outputs={}))
    assert analyst.prompts == [] and len(author.prompts) == 1


def test_a_diagnosis_that_cannot_be_had_leaves_the_author_to_go_on_without_it() -> None:
    author = FakeBackend([IMPLEMENTATION])
    # Three malformed answers: the analyst's bounded corrections run out.
    analyst = FakeBackend([{"summary": ""}, None, {"nope": 1}])
    output = routed(author, analyst).produce(retry_request())
    assert len(analyst.prompts) == 3
    assert "Diagnosis" not in author.prompts[0][1].user
    assert output.files


def test_a_transient_error_of_the_analyst_fails_the_attempt_as_transient() -> None:
    author = FakeBackend([IMPLEMENTATION])
    analyst = FakeBackend([TransientAgentError("429 from the provider")])
    with pytest.raises(TransientAgentError):
        routed(author, analyst).produce(retry_request())
    assert author.prompts == []


# -- the factory --------------------------------------------------------------------------


def test_a_trace_analyst_is_in_a_runs_options_only_when_pact_yaml_configures_it() -> None:
    plain = json.loads(agent_options("openai", AgentsSettings())["roles"])
    assert "trace_analyst" not in plain and "code_author" in plain
    configured = AgentsSettings.model_validate(
        {"trace_analyst": {"backend": "anthropic", "model": "claude-haiku-4-5"}}
    )
    roles = json.loads(agent_options("openai", configured)["roles"])
    assert roles["trace_analyst"]["backend"] == "anthropic"
    assert roles["code_author"]["backend"] == "openai"
    agent = build_agent("openai", agent_options("openai", configured))
    assert isinstance(agent, RoutedAgent) and Role.TRACE_ANALYST in agent.agents


def test_a_command_backend_cannot_be_the_trace_analyst() -> None:
    settings = AgentsSettings.model_validate(
        {"trace_analyst": {"backend": "command", "argv": ["true"]}}
    )
    with pytest.raises(InputError, match="agents.trace_analyst"):
        build_agent("openai", agent_options("openai", settings))


@pytest.mark.parametrize("backend", ["openai", "anthropic"])
def test_pact_yaml_prices_travel_in_the_options_to_every_backend(backend: str) -> None:
    price = Price(input_per_mtok=1.0, output_per_mtok=2.0)
    settings = AgentsSettings.model_validate({"default": {"model": "house-model-7"}})
    options = agent_options(backend, settings, prices={"house-model-7": price})
    agent = build_agent(backend, options)
    assert isinstance(agent, RoutedAgent)
    for role in (Role.CONTRACT_AUTHOR, Role.TEST_AUTHOR, Role.CODE_AUTHOR, Role.INTEGRATOR):
        structured = agent.agents[role]
        assert isinstance(structured, StructuredAgent)
        assert dict(structured.backend.prices) == {"house-model-7": price}


@pytest.mark.parametrize(
    "options",
    [
        {"roles": "not json"},
        {"roles": '{"code_author": {"backend": "openai", "bogus": 1}}'},
        {"roles": "{}", "prices": '{"m": {"input_per_mtok": -1}}'},
    ],
)
def test_malformed_agent_options_are_bad_input(options: dict[str, str]) -> None:
    with pytest.raises(InputError, match="malformed"):
        build_agent("openai", options)
