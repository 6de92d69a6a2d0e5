"""The OpenAI(-compatible) backend: one Chat Completions call per answer.

Any server that speaks the Chat Completions wire format can serve a role: OpenAI itself,
or a local model server (``base_url: http://127.0.0.1:8000/v1``). The role's JSON schema
goes out as the parameters of one function the model is forced to call (function calling
is the structured-output feature OpenAI-compatible servers support most widely), and the
call's arguments are the answer. Arguments that are not JSON come back as
``Completion(data=None)`` so that :class:`~pact_workers.agents.llm.StructuredAgent` asks
again; the correction goes after the previous assistant turn, so the model sees what it
answered.

Answers are streamed: a stream that sends nothing for ``idle_timeout_s`` is abandoned
(TransientAgentError, no retry here: the scheduler backs off). The SDK's timeout is an
httpx timeout whose ``read`` part applies to every socket read, so the read timeout is
the idle timeout, however long the whole answer takes (SSE comment lines a server sends
as keep-alives count as activity). An answer cut off at ``max_tokens`` is a
PermanentAgentError: asking again would be cut off the same way. 408, 409, 429, 5xx and
connection failures are retried here with capped exponential backoff (the SDK's own
retries are off, so ``max_retries`` means what ``pact.yaml`` says), then reported as
TransientAgentError; a bad request (a prompt over the context length included) is a
PermanentAgentError; a rejected key, a missing permission, an unknown model or an
exhausted quota is a SystemicAgentError, which pauses the run.

The API key is read, when the first call is made, from the environment variable that
``api_key_env`` names (default ``OPENAI_API_KEY``) of the process that calls the server;
a server on the loopback interface may need none. The key never appears in an error
message or a log line.

The request lives in :mod:`~pact_workers.agents.openai_request`, reading the answer in
:mod:`~pact_workers.agents.openai_reply`, the error mapping in
:mod:`~pact_workers.agents.openai_errors`; this module is the backend that drives them.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import urlsplit

import openai
from openai.types import CompletionUsage
from openai.types.chat import ChatCompletionMessageParam
from tenacity import RetryCallState, Retrying, retry_if_exception_type, stop_after_attempt
from tenacity import wait_exponential_jitter as _wait_exponential_jitter

from pact_workers.agents.config import DEFAULT_MODELS, AgentConfig
from pact_workers.agents.endpoint import display_url, host_port, is_loopback
from pact_workers.agents.llm import Completion
from pact_workers.agents.openai_errors import (
    LOCAL_PLACEHOLDER_KEY,
    Retryable,
    scrubbed,
    translate,
)
from pact_workers.agents.openai_reply import (
    Answer,
    answer_from_chunks,
    answer_from_completion,
    assistant_turn,
    parse_json,
)
from pact_workers.agents.openai_request import Conversation, forced_function, function_name
from pact_workers.agents.pricing import Price, usage_for
from pact_workers.agents.roles import Prompt
from pact_workers.errors import (
    InputError,
    PermanentAgentError,
    ProviderUnreachable,
    SystemicAgentError,
    TransientAgentError,
)
from pact_workers.models.work import Role, Usage

__all__ = ["DEFAULT_BASE_URL", "LOCAL_PLACEHOLDER_KEY", "OpenAIBackend"]

log = logging.getLogger(__name__)

DEFAULT_BASE_URL = "https://api.openai.com/v1"
DEFAULT_KEY_ENV = "OPENAI_API_KEY"
#: Backoff between the backend's own retries: base * 2^n plus up to ``base`` of jitter.
BACKOFF_BASE_S = 1.0
BACKOFF_CAP_S = 30.0
#: A server that has not accepted the connection within this is unreachable, not slow.
CONNECT_TIMEOUT_S = 10.0


class OpenAIBackend:
    """An :class:`~pact_workers.agents.llm.LLMBackend` over the official ``openai`` SDK.

    One backend serves one role and may be called from many threads at once (the local
    executor runs attempts in a thread pool): the HTTP client is shared, the conversation
    a correction continues is kept per thread.
    """

    name = "openai"

    def __init__(
        self,
        *,
        model: str,
        base_url: str | None = None,
        api_key_env: str | None = None,
        max_tokens: int = 16_000,
        idle_timeout_s: float = 120.0,
        request_timeout_s: float = 1800.0,
        max_retries: int = 4,
        stream: bool = True,
        prices: Mapping[str, Price] | None = None,
        backoff_base_s: float = BACKOFF_BASE_S,
        backoff_cap_s: float = BACKOFF_CAP_S,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        """
        Args:
            model: The model id the server knows.
            base_url: The server's ``/v1`` URL; default ``OPENAI_BASE_URL`` or OpenAI's.
            api_key_env: The environment variable holding the key (``OPENAI_API_KEY``).
            max_tokens: The answer's token limit.
            idle_timeout_s: Streaming: abandon a stream that sends nothing for this long.
            request_timeout_s: Without streaming: the longest a whole answer may take.
            max_retries: Retries of transient failures (408, 409, 429, 5xx, connection).
            stream: Stream the answer (the idle timeout needs it).
            prices: Prices that override the built-in table (``pact.yaml`` ``prices:``).
            backoff_base_s: First retry's delay; it doubles per retry.
            backoff_cap_s: The longest delay between retries.
            sleep: How to wait between retries (tests pass a recorder).

        Raises:
            InputError: a base URL that is not http(s), or an empty model id.
        """
        if not model:
            raise InputError("agents: the openai backend needs a model id (model: ...)")
        self.model = model
        self.base_url = _resolve_base_url(base_url)
        self.api_key_env = api_key_env or DEFAULT_KEY_ENV
        self.max_tokens = max_tokens
        self.idle_timeout_s = idle_timeout_s
        self.request_timeout_s = request_timeout_s
        self.max_retries = max_retries
        self.stream = stream
        self.prices: dict[str, Price] = dict(prices or {})
        self.backoff_base_s = backoff_base_s
        self.backoff_cap_s = backoff_cap_s
        self._sleep = sleep
        self._client: openai.OpenAI | None = None
        self._key: str | None = None
        self._lock = threading.Lock()
        self._local = threading.local()

    @classmethod
    def from_config(
        cls,
        config: AgentConfig,
        *,
        stream: bool = True,
        backoff_base_s: float = BACKOFF_BASE_S,
        backoff_cap_s: float = BACKOFF_CAP_S,
        prices: Mapping[str, Price] | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> OpenAIBackend:
        """The backend a role's ``pact.yaml`` configuration describes; the keywords are
        what :class:`AgentConfig` does not hold (``prices`` from ``pact.yaml`` ``prices:``).

        Nothing is sent and no key is read here: the key lives where the calls are made
        (a worker), which need not be the machine that builds the run.

        Raises:
            InputError: a base URL that is not http(s).
        """
        return cls(
            model=config.model or DEFAULT_MODELS["openai"],
            base_url=config.base_url,
            api_key_env=config.api_key_env,
            max_tokens=config.max_tokens,
            idle_timeout_s=config.idle_timeout_s,
            request_timeout_s=config.timeout_s,
            max_retries=config.max_retries,
            stream=stream,
            prices=prices,
            backoff_base_s=backoff_base_s,
            backoff_cap_s=backoff_cap_s,
            sleep=sleep,
        )

    # -- the LLMBackend protocol --------------------------------------------------------

    def complete(
        self,
        prompt: Prompt,
        *,
        role: Role,
        schema: dict[str, Any],
        correction: str | None = None,
    ) -> Completion:
        """Ask once; a correction continues this thread's previous exchange for ``prompt``.

        Raises:
            ProviderUnreachable: no connection to the server, after the retries.
            TransientAgentError: a stalled stream, or transient failures past the retries.
            PermanentAgentError: a bad request (e.g. the prompt exceeds the context).
            SystemicAgentError: no key, a rejected key, no permission, an unknown model.
        """
        client = self._get_client()
        conversation = self._conversation(prompt, correction)
        function = function_name(role)
        retrying = Retrying(
            stop=stop_after_attempt(self.max_retries + 1),
            wait=self._wait,
            retry=retry_if_exception_type(Retryable),
            reraise=True,
            sleep=self._sleep,
        )
        try:
            answer = retrying(
                self._call_reporting, client, list(conversation.messages), function, schema
            )
        except Retryable as exc:
            gave_up = f"gave up after {self.max_retries + 1} attempts"
            if exc.unreachable:
                raise ProviderUnreachable(host_port(self.base_url), f"{exc}; {gave_up}") from exc
            raise TransientAgentError(f"{exc} ({gave_up})") from exc
        conversation.messages.extend(assistant_turn(answer, function))
        data = parse_json(answer.text)
        if data is None and answer.finish_reason == "length":
            # Asking again would be cut off the same way, at the same price.
            raise PermanentAgentError(
                f"{self.where()}: the answer was cut off at max_tokens ({self.max_tokens}); "
                "raise max_tokens for this role in pact.yaml or split the component"
            )
        if data is None:
            log.warning(
                "%s: the answer is not JSON (finish_reason %s, %d characters)",
                self.where(),
                answer.finish_reason,
                len(answer.text),
            )
        return Completion(
            data=data, usage=self._usage(answer.usage), text=answer.text, model=answer.model
        )

    def close(self) -> None:
        """Close the HTTP client (a new one is made if the backend is used again)."""
        with self._lock:
            client, self._client = self._client, None
        if client is not None:
            client.close()

    def __enter__(self) -> OpenAIBackend:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    # -- calls ----------------------------------------------------------------------------

    def _call_reporting(
        self,
        client: openai.OpenAI,
        messages: list[ChatCompletionMessageParam],
        function: str,
        schema: dict[str, Any],
    ) -> Answer:
        """One request, its SDK errors translated into the project's."""
        try:
            return self._call(client, messages, function, schema)
        except openai.OpenAIError as exc:
            raise translate(exc, self, self._key) from scrubbed(exc, self._key)

    def _call(
        self,
        client: openai.OpenAI,
        messages: list[ChatCompletionMessageParam],
        function: str,
        schema: dict[str, Any],
    ) -> Answer:
        tools, choice = forced_function(function, schema)
        # OpenAI deprecated max_tokens (its reasoning models reject it); compatible
        # servers all know max_tokens, not all of them max_completion_tokens.
        official = _is_openai(self.base_url)
        max_completion_tokens = self.max_tokens if official else openai.omit
        max_tokens = openai.omit if official else self.max_tokens
        if not self.stream:
            completion = client.chat.completions.create(
                model=self.model,
                messages=messages,
                tools=tools,
                tool_choice=choice,
                timeout=openai.Timeout(
                    self.request_timeout_s, connect=min(CONNECT_TIMEOUT_S, self.request_timeout_s)
                ),
                max_tokens=max_tokens,
                max_completion_tokens=max_completion_tokens,
            )
            return answer_from_completion(completion, function)
        stream = client.chat.completions.create(
            model=self.model,
            messages=messages,
            tools=tools,
            tool_choice=choice,
            stream=True,
            stream_options={"include_usage": True},
            # The read timeout is the idle timeout: it runs from one received byte to
            # the next, so a stream that goes quiet fails after idle_timeout_s.
            timeout=openai.Timeout(
                self.idle_timeout_s, connect=min(CONNECT_TIMEOUT_S, self.idle_timeout_s)
            ),
            max_tokens=max_tokens,
            max_completion_tokens=max_completion_tokens,
        )
        with stream:
            return answer_from_chunks(stream, function)

    def _wait(self, state: RetryCallState) -> float:
        """Seconds before the next try: what the server asked for, else capped backoff."""
        outcome = state.outcome
        failure = outcome.exception() if outcome is not None else None
        if isinstance(failure, Retryable) and failure.retry_after_s is not None:
            return min(max(failure.retry_after_s, 0.0), self.backoff_cap_s)
        backoff = _wait_exponential_jitter(
            multiplier=self.backoff_base_s, max=self.backoff_cap_s, jitter=self.backoff_base_s
        )
        return float(backoff(state))

    # -- state ----------------------------------------------------------------------------

    def _get_client(self) -> openai.OpenAI:
        with self._lock:
            if self._client is None:
                key = os.environ.get(self.api_key_env, "").strip()
                if not key:
                    if not is_loopback(self.base_url):
                        raise SystemicAgentError(
                            f"{self.where()}: no API key: set the environment variable "
                            f"{self.api_key_env} where the agents run (api_key_env in "
                            "pact.yaml names another variable)"
                        )
                    key = LOCAL_PLACEHOLDER_KEY
                self._key = key
                self._client = openai.OpenAI(
                    api_key=key,
                    base_url=self.base_url,
                    max_retries=0,  # retried here, where the retries are counted and logged
                )
            return self._client

    def _conversation(self, prompt: Prompt, correction: str | None) -> Conversation:
        current: Conversation | None = getattr(self._local, "conversation", None)
        if correction is None or current is None or current.prompt != prompt:
            current = Conversation.start(prompt)
            self._local.conversation = current
        if correction is not None:
            current.messages.append({"role": "user", "content": correction})
        return current

    def _usage(self, usage: CompletionUsage | None) -> Usage:
        if usage is None:
            log.warning(
                "%s: the server reported no token usage; counting 0 tokens for this call",
                self.where(),
            )
            return Usage()
        details = usage.prompt_tokens_details
        cached = min(max((details.cached_tokens or 0) if details else 0, 0), usage.prompt_tokens)
        return usage_for(
            self.model,
            input_tokens=usage.prompt_tokens - cached,
            output_tokens=usage.completion_tokens,
            cache_read_tokens=cached,
            overrides=self.prices,
        )

    def where(self) -> str:
        """``openai model 'm' at URL``: which server and model, for messages."""
        return f"openai model {self.model!r} at {display_url(self.base_url)}"


# -- helpers ------------------------------------------------------------------------------


def _resolve_base_url(base_url: str | None) -> str:
    url = (base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL).strip()
    parts = urlsplit(url)
    if parts.scheme not in {"http", "https"} or not parts.hostname:
        raise InputError(
            f"agents: base_url {display_url(url)!r} is not an http(s) URL; "
            "expected e.g. http://127.0.0.1:8000/v1"
        )
    return url.rstrip("/")


def _is_openai(url: str) -> bool:
    return (urlsplit(url).hostname or "").endswith("api.openai.com")
