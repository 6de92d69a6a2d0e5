"""The OpenAI(-compatible) backend, over the real ``openai`` SDK, against a local stand-in.

No external service is contacted: every test that makes a call points the backend at
``tests.standins.openai_server``, a stdlib HTTP server on 127.0.0.1 that speaks the Chat
Completions wire format. It is a stand-in, not OpenAI.
"""

from __future__ import annotations

import json
import logging
import socket
import time
import traceback
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from pact_workers.agents.base import AgentRequest
from pact_workers.agents.factory import AgentConfig
from pact_workers.agents.llm import StructuredAgent
from pact_workers.agents.openai import LOCAL_PLACEHOLDER_KEY, OpenAIBackend
from pact_workers.agents.pricing import Price
from pact_workers.agents.roles import Prompt, output_schema
from pact_workers.classify import classify_error
from pact_workers.errors import (
    UNREACHABLE_PREFIX,
    InputError,
    PermanentAgentError,
    ProviderUnreachable,
    SystemicAgentError,
    TransientAgentError,
)
from pact_workers.models.work import ErrorClass, Phase, Role, Usage
from tests.standins.openai_server import OpenAIStandIn, Reply

MODEL = "standin-model-1"
PRICE = Price(input_per_mtok=2.0, output_per_mtok=8.0, cache_read_per_mtok=0.5)
SOURCE = "def add(a: int, b: int) -> int:\n    return a + b\n"
PROMPT = Prompt(system="You are the code author.", user="# Component adder", version="v1")
SCHEMA: dict[str, Any] = {"type": "object"}

Factory = Callable[..., OpenAIBackend]


@pytest.fixture
def standin() -> Iterator[OpenAIStandIn]:
    with OpenAIStandIn() as server:
        yield server
    assert server.errors == []


@pytest.fixture
def make_backend(standin: OpenAIStandIn) -> Iterator[Factory]:
    """Backends pointed at the stand-in, with fast backoff; closed after the test."""
    made: list[OpenAIBackend] = []

    def make(**options: Any) -> OpenAIBackend:
        options = {
            "model": MODEL,
            "base_url": standin.base_url,
            "prices": {MODEL: PRICE},
            "backoff_base_s": 0.01,
            "backoff_cap_s": 0.05,
            **options,
        }
        backend = OpenAIBackend(**options)
        made.append(backend)
        return backend

    yield make
    for backend in made:
        backend.close()


@pytest.fixture(autouse=True)
def _no_ambient_openai_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "PACT_TEST_OPENAI_KEY"):
        monkeypatch.delenv(name, raising=False)


def code_request(component_id: str = "adder") -> AgentRequest:
    return AgentRequest(
        run_id="run-1",
        component_id=component_id,
        phase=Phase.IMPLEMENT,
        role=Role.CODE_AUTHOR,
        attempt=1,
    )


def expected_usage(prompt: int, completion: int, cached: int) -> Usage:
    cost = ((prompt - cached) * 2.0 + completion * 8.0 + cached * 0.5) / 1_000_000
    return Usage(input_tokens=prompt, output_tokens=completion, cost_usd=cost)


def assert_same_usage(actual: Usage, expected: Usage) -> None:
    assert actual.input_tokens == expected.input_tokens
    assert actual.output_tokens == expected.output_tokens
    assert actual.cost_usd == pytest.approx(expected.cost_usd, rel=1e-12)


def chain(exc: BaseException) -> Iterator[BaseException]:
    current: BaseException | None = exc
    while current is not None:
        yield current
        current = current.__cause__ or current.__context__


@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "not-streamed"])
def test_a_function_call_answer_becomes_the_roles_files_with_its_usage_and_cost(
    standin: OpenAIStandIn, make_backend: Factory, stream: bool
) -> None:
    """The local stand-in server answers with a forced function call; the structured
    agent turns it into src/ files and prices the tokens (cached ones at the cache rate)."""
    standin.script(
        Reply.answer(
            {"files": {"adder.py": SOURCE}},
            prompt_tokens=1200,
            completion_tokens=300,
            cached_tokens=500,
        )
    )
    backend = make_backend(stream=stream, max_tokens=4096)
    agent = StructuredAgent(backend)

    output = agent.produce(code_request())

    assert output.files == {"src/adder.py": SOURCE.encode()}
    assert output.model == MODEL
    assert agent.name == f"openai:{MODEL}"
    assert_same_usage(output.usage, expected_usage(1200, 300, 500))
    (request,) = standin.requests
    body = request.body
    assert request.path == "/v1/chat/completions"
    assert body["model"] == MODEL
    assert [m["role"] for m in body["messages"]] == ["system", "user"]
    assert body["messages"][1]["content"].startswith("# Component adder")
    (tool,) = body["tools"]
    assert tool["type"] == "function"
    assert tool["function"]["name"] == "submit_code_author"
    assert tool["function"]["parameters"] == output_schema(Role.CODE_AUTHOR)
    assert body["tool_choice"] == {"type": "function", "function": {"name": "submit_code_author"}}
    # A compatible server is sent max_tokens; OpenAI itself would get max_completion_tokens.
    assert body["max_tokens"] == 4096 and "max_completion_tokens" not in body
    if stream:
        assert body["stream"] is True
        assert body["stream_options"] == {"include_usage": True}
    else:
        assert not body.get("stream")
        assert "stream_options" not in body


def test_a_stream_without_usage_counts_zero_tokens_and_warns(
    standin: OpenAIStandIn, make_backend: Factory, caplog: pytest.LogCaptureFixture
) -> None:
    """The local stand-in server streams an answer but never sends the usage chunk: the
    answer counts, its tokens are 0, and a warning says why."""
    standin.script(Reply.answer({"files": {"adder.py": SOURCE}}, send_usage=False))
    backend = make_backend()

    with caplog.at_level(logging.WARNING, logger="pact_workers.agents.openai"):
        completion = backend.complete(PROMPT, role=Role.CODE_AUTHOR, schema=SCHEMA)

    assert completion.data == {"files": {"adder.py": SOURCE}}
    assert completion.usage == Usage()
    assert "no token usage" in caplog.text


def test_malformed_arguments_are_corrected_after_the_previous_assistant_turn(
    standin: OpenAIStandIn, make_backend: Factory
) -> None:
    """The local stand-in server first sends arguments that are not JSON; the correction
    follows the model's own previous turn, and the second answer is accepted."""
    standin.script(
        Reply.answer('{"files": {"adder.py": "def add(', prompt_tokens=400, completion_tokens=20),
        Reply.answer({"files": {"adder.py": SOURCE}}, prompt_tokens=460, completion_tokens=40),
    )
    agent = StructuredAgent(make_backend())

    output = agent.produce(code_request())

    assert output.files == {"src/adder.py": SOURCE.encode()}
    assert_same_usage(output.usage, expected_usage(400 + 460, 20 + 40, 0))
    first, second = (r.body["messages"] for r in standin.requests)
    assert second[: len(first)] == first
    assistant, tool_reply, correction = second[len(first) :]
    assert assistant["role"] == "assistant"
    (call,) = assistant["tool_calls"]
    assert call["function"] == {
        "name": "submit_code_author",
        "arguments": '{"files": {"adder.py": "def add(',
    }
    assert tool_reply == {
        "role": "tool",
        "tool_call_id": call["id"],
        "content": tool_reply["content"],
    }
    assert correction["role"] == "user" and "not valid JSON" in correction["content"]


def test_an_answer_cut_off_at_max_tokens_is_permanent_and_not_asked_again(
    standin: OpenAIStandIn, make_backend: Factory
) -> None:
    """The local stand-in server stops the arguments half way with finish_reason length:
    a correction would be cut off the same way, so it is a PermanentAgentError at once."""
    standin.script(
        Reply.answer('{"files": {"adder.py": "def', finish_reason="length"),
        Reply.answer({"files": {"adder.py": SOURCE}}),
    )
    agent = StructuredAgent(make_backend(max_tokens=512))

    with pytest.raises(PermanentAgentError, match="max_tokens"):
        agent.produce(code_request())

    assert len(standin.requests) == 1


def test_a_fresh_prompt_does_not_carry_an_earlier_conversation(
    standin: OpenAIStandIn, make_backend: Factory
) -> None:
    """Two produce() calls in a row on the local stand-in server: the second starts from
    its own system and user messages only."""
    standin.script(
        Reply.answer("not json"),
        Reply.answer({"files": {"adder.py": SOURCE}}),
        Reply.answer({"files": {"other.py": SOURCE}}),
    )
    agent = StructuredAgent(make_backend())
    agent.produce(code_request("adder"))
    agent.produce(code_request("other"))

    last = standin.requests[-1].body["messages"]
    assert [m["role"] for m in last] == ["system", "user"]
    assert last[1]["content"].startswith("# Component other")


def test_a_rate_limit_is_retried_with_backoff_then_succeeds(
    standin: OpenAIStandIn, make_backend: Factory
) -> None:
    """The local stand-in server answers 429 once, then the answer: the backend retries
    by itself (the SDK's own retries are off) and the caller sees only the answer."""
    standin.script(
        Reply.failure(429, "Rate limit reached", code="rate_limit_exceeded", type_="requests"),
        Reply.answer({"files": {"adder.py": SOURCE}}, prompt_tokens=10, completion_tokens=5),
    )
    waits: list[float] = []
    backend = make_backend(max_retries=2, sleep=waits.append)

    completion = backend.complete(PROMPT, role=Role.CODE_AUTHOR, schema=SCHEMA)

    assert completion.data == {"files": {"adder.py": SOURCE}}
    assert_same_usage(completion.usage, expected_usage(10, 5, 0))
    assert len(standin.requests) == 2
    (wait,) = waits
    assert 0.01 <= wait <= 0.05  # base 0.01 s plus jitter, capped at 0.05 s


def test_retry_after_from_the_server_sets_the_wait(
    standin: OpenAIStandIn, make_backend: Factory
) -> None:
    """The local stand-in server asks for 0.3 s with retry-after-ms, then for an hour
    with retry-after: the backend waits what it is told, up to its cap."""
    standin.script(
        Reply.failure(503, "overloaded", type_="server_error", headers={"retry-after-ms": "300"}),
        Reply.failure(429, "slow down", type_="requests", headers={"retry-after": "3600"}),
        Reply.answer({"files": {"adder.py": SOURCE}}),
    )
    waits: list[float] = []
    backend = make_backend(max_retries=2, backoff_cap_s=1.0, sleep=waits.append)

    backend.complete(PROMPT, role=Role.CODE_AUTHOR, schema=SCHEMA)

    assert waits == [pytest.approx(0.3), 1.0]
    assert len(standin.requests) == 3


def test_transient_failures_past_the_retries_are_a_transient_error(
    standin: OpenAIStandIn, make_backend: Factory
) -> None:
    """The local stand-in server fails with 500 on every try: after max_retries retries
    the backend gives up with a TransientAgentError that the scheduler retries later."""
    standin.script(*[Reply.failure(500, "internal error", type_="server_error")] * 3)
    waits: list[float] = []
    backend = make_backend(max_retries=2, sleep=waits.append)

    with pytest.raises(TransientAgentError) as caught:
        backend.complete(PROMPT, role=Role.CODE_AUTHOR, schema=SCHEMA)

    assert type(caught.value) is TransientAgentError
    assert "HTTP 500" in str(caught.value) and "3 attempts" in str(caught.value)
    assert classify_error(caught.value) is ErrorClass.TRANSIENT
    assert any(type(e).__name__ == "InternalServerError" for e in chain(caught.value))
    assert len(standin.requests) == 3
    assert len(waits) == 2 and 0.02 <= waits[1] <= 0.05  # doubled, capped


def test_an_unreachable_server_is_retried_then_transient(make_backend: Factory) -> None:
    """No server listens on the port (the local stand-in is not used): connection refused
    is retried, then reported as a TransientAgentError chained to the SDK's error."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    backend = make_backend(base_url=f"http://127.0.0.1:{port}/v1", max_retries=1)

    with pytest.raises(TransientAgentError) as caught:
        backend.complete(PROMPT, role=Role.CODE_AUTHOR, schema=SCHEMA)

    assert "cannot reach the server" in str(caught.value)
    assert any(type(e).__name__ == "APIConnectionError" for e in chain(caught.value))
    assert classify_error(caught.value) is ErrorClass.TRANSIENT


@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "not-streamed"])
def test_a_refused_connection_is_provider_unreachable_naming_host_and_port(
    make_backend: Factory,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    stream: bool,
) -> None:
    """Nothing listens on the port (the local stand-in is not used) and the base URL
    carries credentials: after the retries the backend raises ProviderUnreachable,
    transient, naming host:port and the refusal; no message, chained error, traceback or
    log line holds the key or the URL's password."""
    secret = "sk-remote-0123456789abcdef"
    monkeypatch.setenv("PACT_TEST_OPENAI_KEY", secret)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    backend = make_backend(
        base_url=f"http://proxyuser:url-password-9@127.0.0.1:{port}/v1",
        api_key_env="PACT_TEST_OPENAI_KEY",
        max_retries=1,
        stream=stream,
    )

    with caplog.at_level(logging.DEBUG), pytest.raises(ProviderUnreachable) as caught:
        backend.complete(PROMPT, role=Role.CODE_AUTHOR, schema=SCHEMA)

    error = caught.value
    assert str(error).startswith(f"{UNREACHABLE_PREFIX}127.0.0.1:{port} (")
    assert "ConnectError" in str(error) and "refused" in str(error).lower()
    assert "gave up after 2 attempts" in str(error)
    assert classify_error(error) is ErrorClass.TRANSIENT
    shown = [str(e) for e in chain(error)]
    shown.append("".join(traceback.format_exception(error)))
    shown.append(caplog.text)
    for text in shown:
        assert secret not in text and "url-password-9" not in text


def test_a_rejected_key_is_systemic_and_never_shown(
    make_backend: Factory,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A local stand-in server that wants another key answers 401 and echoes the key it
    was sent; the backend reports a SystemicAgentError naming the variable, at once (no
    retry), and the key appears in no message, traceback or log line."""
    secret = "sk-wrong-0123456789abcdef"
    monkeypatch.setenv("PACT_TEST_OPENAI_KEY", secret)
    with OpenAIStandIn(api_key="sk-right-key-000") as server:
        backend = make_backend(base_url=server.base_url, api_key_env="PACT_TEST_OPENAI_KEY")
        with (
            caplog.at_level(logging.DEBUG),
            pytest.raises(SystemicAgentError) as caught,
        ):
            backend.complete(PROMPT, role=Role.CODE_AUTHOR, schema=SCHEMA)
        backend.close()

    error = caught.value
    assert "PACT_TEST_OPENAI_KEY" in str(error) and "HTTP 401" in str(error)
    assert classify_error(error) is ErrorClass.SYSTEMIC
    assert len(server.requests) == 1 and server.requests[0].had_key
    shown = [str(e) for e in chain(error)]
    shown.append("".join(traceback.format_exception(error)))
    shown.append(caplog.text)
    shown.append(json.dumps([r.body for r in server.requests]))
    for text in shown:
        assert secret not in text


@pytest.mark.parametrize(
    "reply, error_type, words",
    [
        (
            Reply.failure(
                400,
                "This model's maximum context length is 8192 tokens. However, your messages "
                "resulted in 9000 tokens.",
                code="context_length_exceeded",
            ),
            PermanentAgentError,
            "does not fit the model's context",
        ),
        (
            Reply.failure(400, "Invalid schema for function", code="invalid_function_parameters"),
            PermanentAgentError,
            "refused the request",
        ),
        (
            Reply.failure(403, "You do not have access to this model", type_="permission"),
            SystemicAgentError,
            "may not use this model",
        ),
        (
            Reply.failure(404, f"The model `{MODEL}` does not exist", code="model_not_found"),
            SystemicAgentError,
            "does not exist",
        ),
        (
            Reply.failure(429, "You exceeded your current quota", code="insufficient_quota"),
            SystemicAgentError,
            "no quota left",
        ),
    ],
    ids=["context-length", "bad-request", "forbidden", "unknown-model", "no-quota"],
)
def test_errors_that_asking_again_cannot_fix_are_not_retried(
    standin: OpenAIStandIn,
    make_backend: Factory,
    reply: Reply,
    error_type: type[Exception],
    words: str,
) -> None:
    """The local stand-in server answers with an OpenAI error body: a bad request (the
    context length exceeded included) is permanent; a forbidden or unknown model and an
    exhausted quota are systemic. None of them is retried."""
    standin.script(reply, Reply.answer({"files": {"adder.py": SOURCE}}))
    backend = make_backend(max_retries=3)

    with pytest.raises(error_type) as caught:
        backend.complete(PROMPT, role=Role.CODE_AUTHOR, schema=SCHEMA)

    assert type(caught.value) is error_type
    assert words in str(caught.value)
    expected = ErrorClass.SYSTEMIC if error_type is SystemicAgentError else ErrorClass.PERMANENT
    assert classify_error(caught.value) is expected
    assert any(type(e).__module__ == "openai" for e in chain(caught.value))
    assert len(standin.requests) == 1


def test_a_stalled_stream_fails_transiently_in_about_the_idle_timeout(
    standin: OpenAIStandIn, make_backend: Factory
) -> None:
    """The local stand-in server sends the first chunk and then nothing for 30 s; with a
    1 s idle timeout the backend abandons the stream after about 1 s, without retrying
    it itself (the scheduler backs off), as a TransientAgentError."""
    standin.script(Reply.answer({"files": {"adder.py": SOURCE}}, stall_s=30.0))
    backend = make_backend(idle_timeout_s=1.0, max_retries=3)

    started = time.monotonic()
    with pytest.raises(TransientAgentError) as caught:
        backend.complete(PROMPT, role=Role.CODE_AUTHOR, schema=SCHEMA)
    elapsed = time.monotonic() - started

    assert 0.9 <= elapsed < 5.0
    assert "idle_timeout_s" in str(caught.value)
    assert classify_error(caught.value) is ErrorClass.TRANSIENT
    assert len(standin.requests) == 1


def test_a_local_server_needs_no_key(standin: OpenAIStandIn, make_backend: Factory) -> None:
    """No key is set and the base URL is the local stand-in server on 127.0.0.1: the
    backend sends a placeholder key and the call succeeds."""
    standin.script(Reply.answer({"files": {"adder.py": SOURCE}}))
    backend = make_backend()

    completion = backend.complete(PROMPT, role=Role.CODE_AUTHOR, schema=SCHEMA)

    assert completion.data is not None
    assert standin.requests[0].had_key
    assert LOCAL_PLACEHOLDER_KEY not in json.dumps(standin.requests[0].body)


@pytest.mark.parametrize("key_env", [None, "PACT_TEST_OPENAI_KEY"])
def test_a_remote_server_needs_a_key_named_in_the_error(
    standin: OpenAIStandIn, make_backend: Factory, key_env: str | None
) -> None:
    """No key is set and the base URL is remote: a SystemicAgentError names the variable
    before anything is sent (the local stand-in server sees no request)."""
    backend = make_backend(base_url="https://llm.example.invalid/v1", api_key_env=key_env)

    with pytest.raises(SystemicAgentError) as caught:
        backend.complete(PROMPT, role=Role.CODE_AUTHOR, schema=SCHEMA)

    assert (key_env or "OPENAI_API_KEY") in str(caught.value)
    assert classify_error(caught.value) is ErrorClass.SYSTEMIC
    assert standin.requests == []


def test_from_config_takes_the_roles_settings_and_the_price_overrides(
    standin: OpenAIStandIn,
) -> None:
    """from_config maps pact.yaml's agent settings onto the backend (the base URL is the
    local stand-in server's; nothing is sent)."""
    config = AgentConfig(
        backend="openai",
        model=MODEL,
        base_url=standin.base_url + "/",
        api_key_env="PACT_TEST_OPENAI_KEY",
        max_tokens=2048,
        idle_timeout_s=7.5,
        max_retries=2,
        timeout_s=90.0,
    )
    with OpenAIBackend.from_config(config, prices={MODEL: PRICE}) as backend:
        assert backend.name == "openai" and backend.model == MODEL
        assert backend.base_url == standin.base_url
        assert backend.api_key_env == "PACT_TEST_OPENAI_KEY"
        assert (backend.max_tokens, backend.idle_timeout_s) == (2048, 7.5)
        assert (backend.max_retries, backend.request_timeout_s) == (2, 90.0)
        assert backend.prices == {MODEL: PRICE}
    with OpenAIBackend.from_config(AgentConfig(base_url=standin.base_url)) as default:
        assert default.model == "gpt-4.1" and default.api_key_env == "OPENAI_API_KEY"
    assert standin.requests == []


def test_a_base_url_that_is_not_http_is_bad_input(standin: OpenAIStandIn) -> None:
    """A base URL that is not http(s) is rejected when the backend is built (the local
    stand-in server is not contacted)."""
    with pytest.raises(InputError, match="base_url"):
        OpenAIBackend.from_config(AgentConfig(model=MODEL, base_url="127.0.0.1:8000/v1"))
    assert standin.requests == []
