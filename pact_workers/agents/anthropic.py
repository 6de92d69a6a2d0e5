"""The Anthropic backend: one forced tool call per attempt, streamed, with an idle timeout.

The answer comes back as the input of a tool (``emit_answer``) whose ``input_schema`` is
the role's JSON schema, and ``tool_choice`` forces the model to call it. The stable
prefix (the tool and the role's system prompt) carries ``cache_control`` so that prompt
caching keeps it warm across components; cache writes and reads are priced apart.

The reply is streamed (``messages.create(stream=True)``). The SDK's timeout is an httpx
timeout, and httpx applies ``read`` to every socket read, not to the whole request: so
the read timeout *is* the idle timeout, and a stream that stops sending aborts after
``idle_timeout_s`` however long the answer takes as a whole. A stall is reported at
once (TransientAgentError, "stream idle for N s"); the scheduler decides what follows.

Errors, for the scheduler: 408, 409, 429, 5xx (529 overloaded included), an error event
in the stream and connection failures are retried here, with a capped exponential
backoff that honours ``retry-after`` (capped too), then raised as TransientAgentError;
the SDK's own retries are off so that every retry is ours and counted. A bad request
(400 and the other 4xx, a prompt too long, an answer cut off at ``max_tokens``) is a
PermanentAgentError; a bad or missing key, no access, an unknown model, a spent account
(401, 402, 403, 404, spend limits) a SystemicAgentError. The SDK error is chained.

The API key comes from the environment variable ``api_key_env`` (default
``ANTHROPIC_API_KEY``) when the first call is made, so that building the agent in a
process without the key (the scheduler) works; it never appears in an error message.

The request lives in :mod:`~pact_workers.agents.anthropic_request`, reading the reply in
:mod:`~pact_workers.agents.anthropic_reply`, the error mapping in
:mod:`~pact_workers.agents.anthropic_errors`; this module is the backend that drives them.
"""

from __future__ import annotations

import logging
import os
import random
import threading
import time
from collections.abc import Callable, Mapping
from types import TracebackType
from typing import Any, cast

import anthropic
import httpx2
from tenacity import RetryCallState, Retrying, retry_if_exception, stop_after_attempt

from pact_workers.agents.anthropic_errors import describe, retryable, translate
from pact_workers.agents.anthropic_reply import (
    CUT_OFF,
    IncompleteStream,
    Reply,
    reply_from_events,
    reply_from_message,
)
from pact_workers.agents.anthropic_request import TOOL_NAME, Exchange, messages_for, request_fields
from pact_workers.agents.config import DEFAULT_MODELS, AgentConfig
from pact_workers.agents.endpoint import host_port
from pact_workers.agents.llm import Completion
from pact_workers.agents.pricing import Price, usage_for
from pact_workers.agents.roles import Prompt
from pact_workers.backoff import backoff_s, retry_after_s
from pact_workers.errors import AgentError, PermanentAgentError, SystemicAgentError
from pact_workers.models.work import Role, Usage

__all__ = ["DEFAULT_API_KEY_ENV", "TOOL_NAME", "AnthropicBackend"]

log = logging.getLogger(__name__)
_RNG = random.Random()

#: Where the key is read from when ``api_key_env`` is not set (the SDK's own default).
DEFAULT_API_KEY_ENV = "ANTHROPIC_API_KEY"
#: The API's address when neither ``base_url`` nor ``ANTHROPIC_BASE_URL`` says otherwise.
DEFAULT_BASE_URL = "https://api.anthropic.com"


class AnthropicBackend:
    """An :class:`~pact_workers.agents.llm.LLMBackend` over the official ``anthropic`` SDK.

    Thread-safe: one SDK client (and connection pool) is shared; the conversation a
    correction continues is kept per thread.
    """

    name = "anthropic"

    def __init__(
        self,
        *,
        model: str,
        api_key_env: str | None = None,
        base_url: str | None = None,
        max_tokens: int = 16_000,
        idle_timeout_s: float = 120.0,
        max_retries: int = 4,
        stream: bool = True,
        connect_timeout_s: float = 10.0,
        backoff_base_s: float = 1.0,
        backoff_cap_s: float = 30.0,
        prices: Mapping[str, Price] | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        """
        Args:
            model: The model id (``claude-sonnet-4-5``, ...).
            api_key_env: The environment variable that holds the key
                (default ``ANTHROPIC_API_KEY``).
            base_url: The API's address (default: the SDK's, or ``ANTHROPIC_BASE_URL``).
            max_tokens: The output limit of one call.
            idle_timeout_s: The longest silence of the API before a call is abandoned.
                Streaming, it bounds the gap between two events; not streaming, the
                wait for the whole reply.
            max_retries: Retries of one call after a transient failure (0: none).
            stream: Stream the reply (the default) or wait for one JSON message.
            connect_timeout_s: The longest wait for a connection.
            backoff_base_s: The first backoff; it doubles with every retry...
            backoff_cap_s: ...up to this, which also caps a ``retry-after``.
            prices: Price overrides (``pact.yaml``'s ``prices:``) for the cost.
            sleep: How to wait between retries (tests pass a recorder).
        """
        self.model = model
        self.api_key_env = api_key_env or DEFAULT_API_KEY_ENV
        self.base_url = base_url
        self.max_tokens = max_tokens
        self.idle_timeout_s = idle_timeout_s
        self.max_retries = max_retries
        self.stream = stream
        self.connect_timeout_s = min(connect_timeout_s, idle_timeout_s)
        self.backoff_base_s = backoff_base_s
        self.backoff_cap_s = backoff_cap_s
        self.prices = prices
        self._sleep = sleep
        self._client: anthropic.Anthropic | None = None
        self._api_key = ""  # kept only to scrub it from messages
        self._lock = threading.Lock()
        self._local = threading.local()
        self._retries = 0

    @classmethod
    def from_config(
        cls,
        config: AgentConfig,
        *,
        stream: bool = True,
        backoff_base_s: float = 1.0,
        backoff_cap_s: float = 30.0,
        prices: Mapping[str, Price] | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> AnthropicBackend:
        """The backend a role's ``pact.yaml`` configuration describes (no I/O, no key yet);
        the keywords are what ``AgentConfig`` does not hold."""
        return cls(
            model=config.model or DEFAULT_MODELS["anthropic"],
            api_key_env=config.api_key_env,
            base_url=config.base_url,
            max_tokens=config.max_tokens,
            idle_timeout_s=config.idle_timeout_s,
            max_retries=config.max_retries,
            stream=stream,
            backoff_base_s=backoff_base_s,
            backoff_cap_s=backoff_cap_s,
            prices=prices,
            sleep=sleep,
        )

    @property
    def retries(self) -> int:
        """Retries made so far, over every call of this backend."""
        with self._lock:
            return self._retries

    def endpoint(self) -> str:
        """``host:port`` the calls go to (the SDK client's address once it is built)."""
        client = self._client
        url = str(client.base_url) if client is not None else self.base_url
        return host_port(url or os.environ.get("ANTHROPIC_BASE_URL") or DEFAULT_BASE_URL)

    def __repr__(self) -> str:
        return (
            f"AnthropicBackend(model={self.model!r}, base_url={self.base_url!r}, "
            f"api_key_env={self.api_key_env!r}, stream={self.stream})"
        )

    # -- the LLMBackend protocol ------------------------------------------------------------

    def complete(
        self,
        prompt: Prompt,
        *,
        role: Role,
        schema: dict[str, Any],
        correction: str | None = None,
    ) -> Completion:
        """Ask once; a correction continues the previous exchange of this thread.

        Raises:
            ProviderUnreachable: no connection to the API, after the retries.
            TransientAgentError: retries exhausted, or the API went silent.
            PermanentAgentError: a request the API will always refuse, or a cut-off answer.
            SystemicAgentError: no key, a bad key, no access, an unknown model.
        """
        client = self._connect()
        messages = self._messages(prompt, correction)
        retrying = Retrying(
            stop=stop_after_attempt(self.max_retries + 1),
            wait=self._wait,
            retry=retry_if_exception(retryable),
            before_sleep=self._before_sleep,
            sleep=self._sleep,
            reraise=True,
        )
        try:
            reply = retrying(self._call, client, role, schema, prompt, messages)
        except (anthropic.AnthropicError, httpx2.HTTPError, IncompleteStream) as exc:
            raise self._translate(exc, role) from exc
        self._local.exchange = Exchange(prompt=prompt, messages=messages, reply=reply.content)
        if reply.data is None and reply.stop_reason in CUT_OFF:
            raise PermanentAgentError(
                f"anthropic: the {role.value} answer was cut off ({reply.stop_reason}) after "
                f"{reply.output_tokens} output tokens of {self.model}; raise max_tokens "
                f"(now {self.max_tokens}) for this role in pact.yaml or split the component"
            )
        if reply.stop_reason == "refusal":
            raise PermanentAgentError(
                f"anthropic: {self.model} refused to answer the {role.value} prompt"
            )
        usage = self._usage(reply)
        return Completion(data=reply.data, usage=usage, text=reply.text, model=reply.model)

    def close(self) -> None:
        """Close the SDK client and its connections."""
        with self._lock:
            client, self._client = self._client, None
        if client is not None:
            client.close()

    def __enter__(self) -> AnthropicBackend:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- the request ------------------------------------------------------------------------

    def _connect(self) -> anthropic.Anthropic:
        """The SDK client, built on first use from the key in the environment."""
        with self._lock:
            if self._client is None:
                key = os.environ.get(self.api_key_env, "").strip()
                if not key:
                    raise SystemicAgentError(
                        f"anthropic: no API key: the environment variable {self.api_key_env} "
                        "is not set on this worker; set it to an Anthropic API key (or name "
                        "another variable with api_key_env in pact.yaml)"
                    )
                self._client = anthropic.Anthropic(
                    api_key=key,
                    base_url=self.base_url,
                    # httpx applies `read` to every socket read: it is the idle timeout.
                    timeout=httpx2.Timeout(self.idle_timeout_s, connect=self.connect_timeout_s),
                    max_retries=0,  # retries are ours, counted and capped
                )
                self._api_key = key
            return self._client

    def _messages(self, prompt: Prompt, correction: str | None) -> list[dict[str, Any]]:
        """The turns to send: the prompt, or this thread's last exchange and a correction."""
        if correction is None:
            self._local.exchange = None
        return messages_for(prompt, correction, getattr(self._local, "exchange", None))

    def _call(
        self,
        client: anthropic.Anthropic,
        role: Role,
        schema: dict[str, Any],
        prompt: Prompt,
        messages: list[dict[str, Any]],
    ) -> Reply:
        """One HTTP request (tenacity calls it again after a retryable failure)."""
        fields = request_fields(prompt, role, schema)
        system = cast(Any, fields["system"])
        tools = cast(Any, fields["tools"])
        choice = cast(Any, fields["tool_choice"])
        if not self.stream:
            message = client.messages.create(
                model=self.model,
                max_tokens=self.max_tokens,
                system=system,
                messages=cast(Any, messages),
                tools=tools,
                tool_choice=choice,
            )
            return reply_from_message(message)
        events = client.messages.create(
            model=self.model,
            max_tokens=self.max_tokens,
            system=system,
            messages=cast(Any, messages),
            tools=tools,
            tool_choice=choice,
            stream=True,
        )
        with events:
            return reply_from_events(events)

    def _usage(self, reply: Reply) -> Usage:
        return usage_for(
            self.model,
            input_tokens=reply.input_tokens,
            output_tokens=reply.output_tokens,
            cache_write_tokens=reply.cache_write_tokens,
            cache_read_tokens=reply.cache_read_tokens,
            overrides=self.prices,
        )

    # -- retries and errors -----------------------------------------------------------------

    def _wait(self, state: RetryCallState) -> float:
        """``retry-after`` when the API sent one, else exponential with jitter; both capped."""
        exc = state.outcome.exception() if state.outcome is not None else None
        retry_after = (
            retry_after_s(exc.response.headers)
            if isinstance(exc, anthropic.APIStatusError)
            else None
        )
        if retry_after is not None:
            return min(retry_after, self.backoff_cap_s)
        return backoff_s(
            state.attempt_number, base_s=self.backoff_base_s, cap_s=self.backoff_cap_s, rng=_RNG
        )

    def _before_sleep(self, state: RetryCallState) -> None:
        with self._lock:
            self._retries += 1
        exc = state.outcome.exception() if state.outcome is not None else None
        log.warning(
            "anthropic: %s; retry %d of %d in %.2f s",
            self._describe(exc) if exc is not None else "failed",
            state.attempt_number,
            self.max_retries,
            state.upcoming_sleep,
        )

    def _translate(self, exc: BaseException, role: Role) -> AgentError:
        """The project's error for an SDK failure that will not be retried here (any more)."""
        return translate(exc, role, self, self._api_key)

    def _describe(self, exc: BaseException) -> str:
        """A one-line account of a failure, with the API key scrubbed out."""
        return describe(exc, self._api_key)
