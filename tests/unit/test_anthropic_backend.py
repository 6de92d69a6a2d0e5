"""The Anthropic backend, over the official ``anthropic`` SDK, against a local stand-in.

No external service is contacted: every call goes to ``tests.standins.anthropic_server``,
a stdlib HTTP server on 127.0.0.1 that speaks the Messages API wire format (JSON and
server-sent events). It is a local stand-in, not Anthropic's API; a test that passes here
shows that the backend drives the real SDK correctly over that wire format.
"""

from __future__ import annotations

import json
import logging
import socket
import time
import traceback
from collections.abc import Callable, Iterator
from typing import Any

import anthropic
import pytest

from pact_workers.agents.anthropic import TOOL_NAME, AnthropicBackend
from pact_workers.agents.base import AgentRequest
from pact_workers.agents.factory import AgentConfig, RoutedAgent, build_agent
from pact_workers.agents.llm import StructuredAgent
from pact_workers.agents.roles import OutputSchemaError, output_schema, render_prompt
from pact_workers.classify import classify_error
from pact_workers.errors import (
    UNREACHABLE_PREFIX,
    PermanentAgentError,
    ProviderUnreachable,
    SystemicAgentError,
    TransientAgentError,
)
from pact_workers.models.contract import ComponentContract
from pact_workers.models.work import ErrorClass, Phase, Role
from tests.standins.anthropic_server import (
    AnthropicStandIn,
    ErrorReply,
    MalformedToolInput,
    Stall,
    TextAnswer,
    ToolAnswer,
)

KEY = "sk-ant-test-7c1d9e0f4b2a8d6e5f3c1b0a"
KEY_ENV = "PACT_TEST_ANTHROPIC_KEY"
#: In the price table, and not deprecated by SDK 2.12.0 (which warns for claude-sonnet-4-5).
MODEL = "claude-haiku-4-5"
EPHEMERAL = {"type": "ephemeral"}

CONTRACT: dict[str, Any] = {
    "component_id": "calc",
    "name": "Calculator",
    "description": "Adds two integers.",
    "version": 1,
    "functions": [
        {
            "name": "add",
            "description": "Returns a + b.",
            "inputs": [{"name": "a", "type_ref": "int"}, {"name": "b", "type_ref": "int"}],
            "output_type": "int",
            "structured_side_effects": [{"kind": "none"}],
        }
    ],
}
REQUEST = AgentRequest(
    run_id="run-1",
    component_id="calc",
    phase=Phase.CONTRACT,
    role=Role.CONTRACT_AUTHOR,
    attempt=1,
    inputs={"spec": {"component.json": b'{"component_id": "calc", "name": "Calculator"}'}},
)

Factory = Callable[..., AnthropicBackend]
STREAM_MODES = pytest.mark.parametrize("stream", [True, False], ids=["sse", "json"])


@pytest.fixture(autouse=True)
def _environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, KEY)
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_CUSTOM_HEADERS"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def api() -> Iterator[AnthropicStandIn]:
    with AnthropicStandIn(api_key=KEY) as server:
        yield server


@pytest.fixture
def sleeps() -> list[float]:
    return []


@pytest.fixture
def backend(api: AnthropicStandIn, sleeps: list[float]) -> Iterator[Factory]:
    """Backends against the stand-in, built through ``from_config``; closed afterwards."""
    made: list[AnthropicBackend] = []

    def make(
        *, stream: bool = True, backoff_cap_s: float = 0.25, **config: Any
    ) -> AnthropicBackend:
        settings = {
            "backend": "anthropic",
            "model": MODEL,
            "base_url": api.url,
            "api_key_env": KEY_ENV,
            "idle_timeout_s": 5.0,
            "max_retries": 2,
            **config,
        }
        made.append(
            AnthropicBackend.from_config(
                AgentConfig.model_validate(settings),
                stream=stream,
                backoff_base_s=0.01,
                backoff_cap_s=backoff_cap_s,
                sleep=sleeps.append,
            )
        )
        return made[-1]

    yield make
    for item in made:
        item.close()


def _assert_no_key(*things: object) -> None:
    """The key is in none of these, nor in any exception they chain to."""
    for thing in things:
        current: object = thing
        while current is not None:
            assert KEY not in str(current) and KEY not in repr(current)
            current = current.__cause__ if isinstance(current, BaseException) else None


@STREAM_MODES
def test_a_contract_author_answer_becomes_interface_json_with_its_usage_and_cost(
    api: AnthropicStandIn, backend: Factory, stream: bool
) -> None:
    """A forced tool call answers the contract author through StructuredAgent; the usage,
    cache writes and reads included, is priced, and the request carries cache_control on
    the system prompt and the tool, and the forced tool_choice (the API is a local
    stand-in)."""
    api.script(
        ToolAnswer(
            CONTRACT, input_tokens=120, output_tokens=60, cache_write_tokens=2000,
            cache_read_tokens=3000,
        )
    )  # fmt: skip
    agent = StructuredAgent(backend(stream=stream))

    output = agent.produce(REQUEST)

    assert set(output.files) == {"interface.json"}
    contract = ComponentContract.model_validate_json(output.files["interface.json"])
    assert contract.component_id == "calc"
    assert [f.name for f in contract.functions] == ["add"]
    assert output.model == MODEL
    assert output.usage.input_tokens == 120 + 2000 + 3000
    assert output.usage.output_tokens == 60
    # claude-haiku-4-5: $1 in, $5 out, $1.25 cache write, $0.10 cache read per Mtok.
    assert output.usage.cost_usd == pytest.approx((120 + 60 * 5 + 2000 * 1.25 + 3000 * 0.1) / 1e6)

    (sent,) = api.requests
    prompt = render_prompt(REQUEST)
    assert sent.path == "/v1/messages"
    assert sent.stream is stream
    assert sent.body["model"] == MODEL
    assert sent.body["system"] == [
        {"type": "text", "text": prompt.system, "cache_control": EPHEMERAL}
    ]
    (tool,) = sent.body["tools"]
    assert tool["name"] == TOOL_NAME
    assert tool["input_schema"] == output_schema(Role.CONTRACT_AUTHOR)
    assert tool["cache_control"] == EPHEMERAL
    assert sent.body["tool_choice"] == {
        "type": "tool",
        "name": TOOL_NAME,
        "disable_parallel_tool_use": True,
    }
    assert sent.body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": prompt.user}]}
    ]
    # SDK 2.12.0 sends an API key as "Authorization: Bearer <key>" (not x-api-key).
    assert sent.key_headers == ("authorization",)
    assert not sent.key_elsewhere


def test_unparseable_tool_json_is_corrected_in_a_follow_up_turn(
    api: AnthropicStandIn, backend: Factory
) -> None:
    """A streamed tool input that does not parse is an answer without data: the next call
    shows the model what it sent and asks again, and both calls' usage counts (the API is a
    local stand-in)."""
    bad = '{"component_id": "calc", "name": "Calculator", "description": '
    api.script(MalformedToolInput(bad), ToolAnswer(CONTRACT))

    output = StructuredAgent(backend()).produce(REQUEST)

    assert json.loads(output.files["interface.json"])["name"] == "Calculator"
    assert output.usage.input_tokens == 120 + 120
    first, second = api.requests
    assert second.body["system"] == first.body["system"]
    user, assistant, correction = second.body["messages"]
    assert user == first.body["messages"][0]
    assert assistant == {"role": "assistant", "content": [{"type": "text", "text": bad}]}
    assert correction["role"] == "user"
    (text,) = correction["content"]
    assert text["type"] == "text" and "not valid JSON" in text["text"]


@STREAM_MODES
def test_a_schema_invalid_answer_gets_the_problem_back_as_a_tool_result(
    api: AnthropicStandIn, backend: Factory, stream: bool
) -> None:
    """An answer that parses but breaks the role's schema is sent back as the assistant's
    tool_use, answered by an is_error tool_result naming what is wrong; the second answer
    is accepted (the API is a local stand-in that checks the tool_use/tool_result pairing)."""
    api.script(ToolAnswer({"component_id": "calc"}), ToolAnswer(CONTRACT))

    output = StructuredAgent(backend(stream=stream)).produce(REQUEST)

    assert "interface.json" in output.files
    _, second = api.requests
    _, assistant, correction = second.body["messages"]
    (tool_use,) = assistant["content"]
    assert tool_use["type"] == "tool_use"
    assert tool_use["name"] == TOOL_NAME
    assert tool_use["input"] == {"component_id": "calc"}
    (result,) = correction["content"]
    assert result["type"] == "tool_result"
    assert result["tool_use_id"] == tool_use["id"]
    assert result["is_error"] is True
    assert "ComponentContract" in result["content"] and "description" in result["content"]


def test_an_answer_that_stays_wrong_fails_after_the_corrections(
    api: AnthropicStandIn, backend: Factory
) -> None:
    """Prose instead of a tool call, three times: three calls, the conversation growing by
    one exchange each time, then OutputSchemaError (the API is a local stand-in)."""
    api.script(TextAnswer("I think so."), TextAnswer("Yes."), TextAnswer("Sure."))

    with pytest.raises(OutputSchemaError):
        StructuredAgent(backend()).produce(REQUEST)

    assert [len(r.body["messages"]) for r in api.requests] == [1, 3, 5]
    assert api.requests[2].body["messages"][3] == {
        "role": "assistant",
        "content": [{"type": "text", "text": "Yes."}],
    }


@pytest.mark.parametrize(
    ("status", "error_type"),
    [
        (429, "rate_limit_error"),
        (408, "timeout_error"),
        (500, "api_error"),
        (503, "api_error"),
        (529, "overloaded_error"),
    ],
)
def test_a_transient_status_is_retried_once_and_counted(
    api: AnthropicStandIn, backend: Factory, sleeps: list[float], status: int, error_type: str
) -> None:
    """One rate limit, timeout, server error or overload, then an answer: one retry, made
    by the backend (the SDK's own are off) and counted (the API is a local stand-in)."""
    api.script(ErrorReply(status, error_type, "try later"), ToolAnswer(CONTRACT))
    llm = backend()

    output = StructuredAgent(llm).produce(REQUEST)

    assert "interface.json" in output.files
    assert len(api.requests) == 2
    assert llm.retries == 1
    assert len(sleeps) == 1
    assert [r.headers["x-stainless-retry-count"] for r in api.requests] == ["0", "0"]


def test_an_error_event_inside_the_stream_is_retried(
    api: AnthropicStandIn, backend: Factory
) -> None:
    """An overloaded_error event in a 200 stream (which has no status of its own) is
    retried like a 529 (the API is a local stand-in)."""
    api.script(
        ErrorReply(529, "overloaded_error", "Overloaded", in_stream=True), ToolAnswer(CONTRACT)
    )
    llm = backend()

    output = StructuredAgent(llm).produce(REQUEST)

    assert "interface.json" in output.files
    assert [r.stream for r in api.requests] == [True, True]
    assert llm.retries == 1


@STREAM_MODES
def test_a_reply_cut_short_by_a_dropped_connection_is_retried(
    api: AnthropicStandIn, backend: Factory, stream: bool
) -> None:
    """The connection closes after message_start (streaming) or before any reply (JSON):
    a connection failure, retried (the API is a local stand-in)."""
    api.script(Stall(seconds=0), ToolAnswer(CONTRACT))
    llm = backend(stream=stream)

    output = StructuredAgent(llm).produce(REQUEST)

    assert "interface.json" in output.files
    assert len(api.requests) == 2
    assert llm.retries == 1


def test_retry_after_is_honoured_up_to_the_cap(
    api: AnthropicStandIn, backend: Factory, sleeps: list[float]
) -> None:
    """A 429 asking for 30 s waits the cap (0.25 s); one asking for 0.1 s waits 0.1 s (the
    API is a local stand-in)."""
    api.script(
        ErrorReply(429, "rate_limit_error", "slow down", retry_after="30"),
        ErrorReply(429, "rate_limit_error", "slow down", retry_after="0.1"),
        ToolAnswer(CONTRACT),
    )

    StructuredAgent(backend(backoff_cap_s=0.25)).produce(REQUEST)

    assert sleeps == [0.25, pytest.approx(0.1)]


def test_an_overload_that_persists_is_transient_after_the_capped_retries(
    api: AnthropicStandIn, backend: Factory, sleeps: list[float]
) -> None:
    """529 on every attempt: max_retries + 1 requests with growing, capped backoffs, then
    TransientAgentError chained to the SDK's OverloadedError (the API is a local
    stand-in)."""
    api.script(*[ErrorReply(529, "overloaded_error", "Overloaded")] * 3)
    llm = backend(max_retries=2)

    with pytest.raises(TransientAgentError) as caught:
        StructuredAgent(llm).produce(REQUEST)

    assert isinstance(caught.value.__cause__, anthropic.OverloadedError)
    assert "529" in str(caught.value) and "3 attempts" in str(caught.value)
    assert classify_error(caught.value) is ErrorClass.TRANSIENT
    assert len(api.requests) == 3
    assert llm.retries == 2
    assert 0.005 <= sleeps[0] <= 0.01 and 0.01 <= sleeps[1] <= 0.02
    _assert_no_key(caught.value)


def test_a_refused_connection_is_retried_then_transient(backend: Factory) -> None:
    """Nothing listens at base_url: the connection error is retried, then reported as
    transient (no stand-in is reached; the port is a closed local one)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    llm = backend(base_url=f"http://127.0.0.1:{port}", max_retries=1)

    with pytest.raises(TransientAgentError) as caught:
        StructuredAgent(llm).produce(REQUEST)

    assert isinstance(caught.value.__cause__, anthropic.APIConnectionError)
    assert llm.retries == 1
    assert classify_error(caught.value) is ErrorClass.TRANSIENT


def _closed_port() -> int:
    """A local port nothing listens on (connections to it are refused)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


@STREAM_MODES
def test_a_refused_connection_is_provider_unreachable_naming_host_and_port(
    backend: Factory, stream: bool, caplog: pytest.LogCaptureFixture
) -> None:
    """Nothing listens at base_url (no stand-in is reached): after the retries the
    backend raises ProviderUnreachable, transient, whose message names host:port and
    the refusal, and neither it, its chain, the traceback nor the log holds the key."""
    port = _closed_port()
    llm = backend(base_url=f"http://127.0.0.1:{port}", max_retries=1, stream=stream)

    with caplog.at_level(logging.DEBUG), pytest.raises(ProviderUnreachable) as caught:
        StructuredAgent(llm).produce(REQUEST)

    error = caught.value
    assert str(error).startswith(f"{UNREACHABLE_PREFIX}127.0.0.1:{port} (")
    assert "ConnectError" in str(error) and "refused" in str(error).lower()
    assert error.endpoint == f"127.0.0.1:{port}"
    assert classify_error(error) is ErrorClass.TRANSIENT
    assert llm.retries == 1
    _assert_no_key(error)
    assert KEY not in "".join(traceback.format_exception(error)) + caplog.text


def test_a_connection_closed_before_any_reply_is_provider_unreachable(
    api: AnthropicStandIn, backend: Factory
) -> None:
    """The local stand-in accepts the connection and closes it without a reply, every
    time: no answer at all, so the provider is unreachable."""
    api.script(Stall(seconds=0), Stall(seconds=0))
    host_port = api.url.removeprefix("http://")

    with pytest.raises(ProviderUnreachable, match=f"^{UNREACHABLE_PREFIX}{host_port} "):
        StructuredAgent(backend(stream=False, max_retries=1)).produce(REQUEST)

    assert len(api.requests) == 2


def test_a_stream_cut_after_the_answer_began_is_transient_but_not_unreachable(
    api: AnthropicStandIn, backend: Factory
) -> None:
    """The local stand-in sends message_start and then closes: the provider answered, so
    this is a plain transient failure, which many components may meet without an outage."""
    api.script(Stall(seconds=0), Stall(seconds=0))

    with pytest.raises(TransientAgentError) as caught:
        StructuredAgent(backend(stream=True, max_retries=1)).produce(REQUEST)

    assert not isinstance(caught.value, ProviderUnreachable)
    assert not str(caught.value).startswith(UNREACHABLE_PREFIX)


def test_a_rejected_key_is_systemic_and_never_shown(
    api: AnthropicStandIn, backend: Factory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A wrong key gets the API's 401: not retried, SystemicAgentError naming the variable,
    classified SYSTEMIC, with neither key in any message (the API is a local stand-in that
    checks the key)."""
    wrong = "sk-ant-wrong-0a1b2c3d4e5f60718293"
    monkeypatch.setenv(KEY_ENV, wrong)
    api.script(ToolAnswer(CONTRACT))

    with pytest.raises(SystemicAgentError) as caught:
        StructuredAgent(backend()).produce(REQUEST)

    assert isinstance(caught.value.__cause__, anthropic.AuthenticationError)
    assert KEY_ENV in str(caught.value)
    assert classify_error(caught.value) is ErrorClass.SYSTEMIC
    assert len(api.requests) == 1
    assert api.pending == 1  # the 401 came from the key check, not from the script
    _assert_no_key(caught.value)
    assert all(wrong not in str(e) for e in (caught.value, caught.value.__cause__))


@pytest.mark.parametrize(
    ("status", "error_type", "sdk_error"),
    [
        (401, "authentication_error", anthropic.AuthenticationError),
        (403, "permission_error", anthropic.PermissionDeniedError),
        (404, "not_found_error", anthropic.NotFoundError),
    ],
)
def test_no_access_or_an_unknown_model_is_systemic(
    api: AnthropicStandIn,
    backend: Factory,
    status: int,
    error_type: str,
    sdk_error: type[Exception],
) -> None:
    """401, 403 and 404 pause the run (SystemicAgentError) after one request (the API is a
    local stand-in)."""
    api.script(ErrorReply(status, error_type, f"{error_type} for model {MODEL}"))

    with pytest.raises(SystemicAgentError) as caught:
        StructuredAgent(backend()).produce(REQUEST)

    assert isinstance(caught.value.__cause__, sdk_error)
    assert classify_error(caught.value) is ErrorClass.SYSTEMIC
    assert len(api.requests) == 1
    _assert_no_key(caught.value)


def test_a_prompt_too_long_is_permanent(api: AnthropicStandIn, backend: Factory) -> None:
    """A 400 "prompt is too long" fails the item (PermanentAgentError) without a retry (the
    API is a local stand-in)."""
    api.script(
        ErrorReply(400, "invalid_request_error", "prompt is too long: 215000 tokens > 200000")
    )

    with pytest.raises(PermanentAgentError) as caught:
        StructuredAgent(backend()).produce(REQUEST)

    assert isinstance(caught.value.__cause__, anthropic.BadRequestError)
    assert "too long" in str(caught.value)
    assert classify_error(caught.value) is ErrorClass.PERMANENT
    assert len(api.requests) == 1
    _assert_no_key(caught.value)


def test_an_answer_cut_off_at_max_tokens_is_permanent(
    api: AnthropicStandIn, backend: Factory
) -> None:
    """A tool input cut off by the output limit is not sent back for correction (it would
    be cut off again): PermanentAgentError naming max_tokens (the API is a local
    stand-in)."""
    api.script(MalformedToolInput('{"component_id": "calc", "na', stop_reason="max_tokens"))

    with pytest.raises(PermanentAgentError, match="max_tokens"):
        StructuredAgent(backend(max_tokens=1024)).produce(REQUEST)

    assert len(api.requests) == 1
    assert api.requests[0].body["max_tokens"] == 1024


@STREAM_MODES
def test_a_stalled_reply_is_abandoned_within_the_idle_timeout(
    api: AnthropicStandIn, backend: Factory, stream: bool
) -> None:
    """The stand-in sends message_start (streaming) or nothing (JSON) and then stays
    silent for 30 s: the call fails with TransientAgentError after about the idle timeout
    of 1 s, without a retry (the API is a local stand-in)."""
    api.script(Stall(seconds=30))
    llm = backend(stream=stream, idle_timeout_s=1.0)

    started = time.monotonic()
    with pytest.raises(TransientAgentError) as caught:
        StructuredAgent(llm).produce(REQUEST)
    elapsed = time.monotonic() - started

    assert 0.9 <= elapsed < 3.0
    assert str(caught.value).startswith("stream idle for 1 s")
    assert classify_error(caught.value) is ErrorClass.TRANSIENT
    assert len(api.requests) == 1
    assert llm.retries == 0


@pytest.mark.parametrize(
    ("variable", "configured"), [(KEY_ENV, KEY_ENV), ("ANTHROPIC_API_KEY", None)]
)
def test_a_missing_key_is_systemic_and_names_the_variable(
    api: AnthropicStandIn,
    backend: Factory,
    monkeypatch: pytest.MonkeyPatch,
    variable: str,
    configured: str | None,
) -> None:
    """No key in the configured variable (or in ANTHROPIC_API_KEY, the SDK's default):
    SystemicAgentError naming it, and no request at all (the API is a local stand-in)."""
    monkeypatch.delenv(KEY_ENV)
    llm = backend(api_key_env=configured)

    with pytest.raises(SystemicAgentError) as caught:
        StructuredAgent(llm).produce(REQUEST)

    assert variable in str(caught.value)
    assert classify_error(caught.value) is ErrorClass.SYSTEMIC
    assert api.requests == []


def test_the_key_appears_in_no_completion_or_description(
    api: AnthropicStandIn, backend: Factory
) -> None:
    """What a call returns and how the backend describes itself hold no key (the API is a
    local stand-in)."""
    api.script(ToolAnswer(CONTRACT))
    llm = backend()

    completion = llm.complete(
        render_prompt(REQUEST),
        role=Role.CONTRACT_AUTHOR,
        schema=output_schema(Role.CONTRACT_AUTHOR),
    )

    assert completion.data == CONTRACT
    _assert_no_key(completion, llm)
    assert KEY not in json.dumps(api.requests[0].headers)


def test_the_factory_builds_this_backend_from_the_run_options(api: AnthropicStandIn) -> None:
    """``build_agent("anthropic", ...)`` routes the contract author to this backend with the
    role's settings (model, max_tokens, base_url) (the API is a local stand-in)."""
    config = AgentConfig(
        backend="anthropic",
        model=MODEL,
        base_url=api.url,
        api_key_env=KEY_ENV,
        max_tokens=2048,
        idle_timeout_s=5.0,
    )
    agent = build_agent(
        "anthropic", {"roles": json.dumps({"contract_author": config.model_dump(mode="json")})}
    )
    api.script(ToolAnswer(CONTRACT))
    assert isinstance(agent, RoutedAgent)
    routed = agent.agents[Role.CONTRACT_AUTHOR]
    assert isinstance(routed, StructuredAgent)
    llm = routed.backend
    assert isinstance(llm, AnthropicBackend)
    try:
        output = agent.produce(REQUEST)
    finally:
        llm.close()

    assert routed.name == f"anthropic:{MODEL}"
    assert (llm.max_tokens, llm.idle_timeout_s, llm.max_retries) == (2048, 5.0, 4)
    assert "interface.json" in output.files
    assert api.requests[0].body["max_tokens"] == 2048
    assert api.requests[0].stream
