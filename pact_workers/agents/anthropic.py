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
"""

from __future__ import annotations

import json
import logging
import os
import random
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, cast

import anthropic
import httpx2
from anthropic.types import (
    InputJSONDelta,
    Message,
    RawContentBlockDeltaEvent,
    RawContentBlockStartEvent,
    RawMessageDeltaEvent,
    RawMessageStartEvent,
    RawMessageStopEvent,
    RawMessageStreamEvent,
    TextBlock,
    TextDelta,
    ToolUseBlock,
)
from tenacity import RetryCallState, Retrying, retry_if_exception, stop_after_attempt

from pact_workers.agents.factory import DEFAULT_MODELS, AgentConfig
from pact_workers.agents.llm import Completion
from pact_workers.agents.pricing import Price, usage_for
from pact_workers.agents.roles import Prompt
from pact_workers.backoff import backoff_s, retry_after_s
from pact_workers.errors import (
    AgentError,
    PermanentAgentError,
    SystemicAgentError,
    TransientAgentError,
)
from pact_workers.models.work import Role, Usage

__all__ = ["DEFAULT_API_KEY_ENV", "TOOL_NAME", "AnthropicBackend"]

log = logging.getLogger(__name__)
_RNG = random.Random()

#: The tool whose input is the answer.
TOOL_NAME = "emit_answer"
#: Where the key is read from when ``api_key_env`` is not set (the SDK's own default).
DEFAULT_API_KEY_ENV = "ANTHROPIC_API_KEY"
#: Marks the stable prefix (tool, system prompt) for prompt caching.
CACHE_CONTROL = {"type": "ephemeral"}

#: Statuses worth another try: request timeout, lock timeout, rate limit; and >= 500.
RETRY_STATUSES = frozenset({408, 409, 429})
#: Statuses no component gets past until someone fixes the configuration or the account.
SYSTEMIC_STATUSES = frozenset({401, 402, 403, 404})
#: Error types of an ``error`` event inside a 200 stream, which has no status of its own.
RETRY_ERROR_TYPES = frozenset(
    {"rate_limit_error", "overloaded_error", "api_error", "timeout_error"}
)
SYSTEMIC_ERROR_TYPES = frozenset(
    {"authentication_error", "permission_error", "not_found_error", "billing_error"}
)
#: 402/429 causes that waiting does not cure: a person has to raise a limit or pay.
SPEND_LIMIT_CODES = frozenset(
    {
        "contract_spend_limit_reached",
        "enforced_spend_limit_reached",
        "linked_organization_spend_limit_reached",
        "linked_organization_billing_unavailable",
    }
)
#: Stop reasons after which an unusable answer will not get better by asking again.
CUT_OFF = frozenset({"max_tokens", "model_context_window_exceeded"})


class _IncompleteStream(Exception):
    """The stream ended (cleanly, at the HTTP level) before ``message_stop``."""


@dataclass
class _Block:
    kind: str  # "tool_use" or "text"
    id: str = ""
    name: str = ""
    parts: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class _Reply:
    """One model turn, as the backend needs it."""

    data: Any  # the tool input (a dict), or None when there was none that parses
    text: str  # the raw tool input, or the prose when the model did not call the tool
    content: list[dict[str, Any]]  # the assistant turn, to send back with a correction
    stop_reason: str | None
    input_tokens: int
    output_tokens: int
    cache_write_tokens: int
    cache_read_tokens: int


@dataclass(frozen=True)
class _Exchange:
    """The last call of one thread: what a correction continues."""

    prompt: Prompt
    messages: list[dict[str, Any]]
    reply: list[dict[str, Any]]


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
            TransientAgentError: retries exhausted, or the API went silent.
            PermanentAgentError: a request the API will always refuse, or a cut-off answer.
            SystemicAgentError: no key, a bad key, no access, an unknown model.
        """
        client = self._connect()
        messages = self._messages(prompt, correction)
        retrying = Retrying(
            stop=stop_after_attempt(self.max_retries + 1),
            wait=self._wait,
            retry=retry_if_exception(_retryable),
            before_sleep=self._before_sleep,
            sleep=self._sleep,
            reraise=True,
        )
        try:
            reply = retrying(self._call, client, role, schema, prompt, messages)
        except (anthropic.AnthropicError, httpx2.HTTPError, _IncompleteStream) as exc:
            raise self._translate(exc, role) from exc
        self._local.exchange = _Exchange(prompt=prompt, messages=messages, reply=reply.content)
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
        return Completion(data=reply.data, usage=usage, text=reply.text)

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
        """The turns to send: the prompt, or the last exchange and a correction after it."""
        first = {"role": "user", "content": [{"type": "text", "text": prompt.user}]}
        if correction is None:
            self._local.exchange = None
            return [first]
        last: _Exchange | None = getattr(self._local, "exchange", None)
        if last is None or last.prompt != prompt:
            # Nothing to continue (another thread asked first): say it in one turn.
            text = f"{prompt.user}\n\n## About your previous answer\n{correction}"
            return [{"role": "user", "content": [{"type": "text", "text": text}]}]
        tool_uses = [b["id"] for b in last.reply if b.get("type") == "tool_use"]
        # A tool_use must be answered by a tool_result in the very next user turn.
        followup: list[dict[str, Any]] = [
            {"type": "tool_result", "tool_use_id": i, "is_error": True, "content": correction}
            for i in tool_uses
        ] or [{"type": "text", "text": correction}]
        return [
            *last.messages,
            {"role": "assistant", "content": last.reply},
            {"role": "user", "content": followup},
        ]

    def _call(
        self,
        client: anthropic.Anthropic,
        role: Role,
        schema: dict[str, Any],
        prompt: Prompt,
        messages: list[dict[str, Any]],
    ) -> _Reply:
        """One HTTP request (tenacity calls it again after a retryable failure)."""
        system = [{"type": "text", "text": prompt.system, "cache_control": CACHE_CONTROL}]
        tool = {
            "name": TOOL_NAME,
            "description": (
                f"Submit your answer as the {role.value}: the JSON object your instructions "
                "ask for, as this tool's input. Call it exactly once."
            ),
            "input_schema": schema,
            "cache_control": CACHE_CONTROL,
        }
        choice = {"type": "tool", "name": TOOL_NAME, "disable_parallel_tool_use": True}
        if not self.stream:
            message = client.messages.create(
                model=self.model,
                max_tokens=self.max_tokens,
                system=cast(Any, system),
                messages=cast(Any, messages),
                tools=cast(Any, [tool]),
                tool_choice=cast(Any, choice),
            )
            return _reply_from_message(message)
        events = client.messages.create(
            model=self.model,
            max_tokens=self.max_tokens,
            system=cast(Any, system),
            messages=cast(Any, messages),
            tools=cast(Any, [tool]),
            tool_choice=cast(Any, choice),
            stream=True,
        )
        with events:
            return _reply_from_events(events)

    def _usage(self, reply: _Reply) -> Usage:
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
        what = self._describe(exc)
        if _is_idle(exc):
            return TransientAgentError(
                f"stream idle for {self.idle_timeout_s:g} s: no data from the Anthropic API "
                f"({self.model}); the call was abandoned"
            )
        if _retryable(exc):
            attempts = self.max_retries + 1
            return TransientAgentError(
                f"anthropic: {what}; gave up after {attempts} attempt{'s' * (attempts > 1)}"
            )
        if not isinstance(exc, anthropic.APIStatusError):
            return PermanentAgentError(f"anthropic: {what}")
        status, error_type = exc.status_code, exc.type
        if exc.error_code in SPEND_LIMIT_CODES:
            return SystemicAgentError(
                f"anthropic: {what}; the account cannot spend more until someone raises the limit"
            )
        if status == 401 or error_type == "authentication_error":
            return SystemicAgentError(
                f"anthropic: the API refused the key in {self.api_key_env} ({what}); set a "
                f"valid key in {self.api_key_env}"
            )
        if status == 403 or error_type == "permission_error":
            return SystemicAgentError(
                f"anthropic: the key in {self.api_key_env} has no access to {self.model} ({what})"
            )
        if status == 404 or error_type == "not_found_error":
            return SystemicAgentError(
                f"anthropic: unknown model {self.model!r} or wrong base_url "
                f"{self.base_url or 'default'} ({what}); fix the model in pact.yaml"
            )
        if status in SYSTEMIC_STATUSES or error_type in SYSTEMIC_ERROR_TYPES:
            return SystemicAgentError(f"anthropic: {what}; check the account's billing")
        message = (exc.api_message or "").lower()
        if "prompt is too long" in message or ("context" in message and "limit" in message):
            return PermanentAgentError(
                f"anthropic: the {role.value} prompt is too long for {self.model} ({what}); "
                "give the component less context or split it"
            )
        if "max_tokens" in message:
            return PermanentAgentError(
                f"anthropic: max_tokens {self.max_tokens} is not allowed for {self.model} "
                f"({what}); lower max_tokens for this role in pact.yaml"
            )
        return PermanentAgentError(f"anthropic: the API rejected the request ({what})")

    def _describe(self, exc: BaseException) -> str:
        """A one-line account of a failure, with the API key scrubbed out."""
        if isinstance(exc, anthropic.APIStatusError):
            kind = exc.type or "error"
            detail = exc.api_message or exc.message
            text = (
                f"HTTP {exc.status_code} {kind}: {detail}"
                if exc.status_code >= 400
                else f"{kind} in the stream: {detail}"
            )
        elif isinstance(exc, anthropic.APIConnectionError) and exc.__cause__ is not None:
            text = f"{exc.message} ({type(exc.__cause__).__name__}: {exc.__cause__})"
        else:
            text = f"{type(exc).__name__}: {exc}"
        return _scrub(text.strip(), self._api_key)


def _retryable(exc: BaseException) -> bool:
    """Worth another try now: a rate limit, an overload, a server or connection failure."""
    if _is_idle(exc):
        return False  # the scheduler decides what a stalled call deserves
    if isinstance(exc, anthropic.APIStatusError):
        if exc.error_code in SPEND_LIMIT_CODES:
            return False
        if exc.status_code < 400:  # an error event inside a stream
            return exc.type in RETRY_ERROR_TYPES
        return exc.status_code in RETRY_STATUSES or exc.status_code >= 500
    # APITimeoutError is an APIConnectionError; httpx2 errors escape the SDK mid-stream.
    return isinstance(exc, anthropic.APIConnectionError | httpx2.TransportError | _IncompleteStream)


def _is_idle(exc: BaseException) -> bool:
    """The API sent nothing for the read timeout (the idle timeout)."""
    if isinstance(exc, httpx2.ReadTimeout):
        return True  # mid-stream: the SDK lets httpx's error through
    return isinstance(exc, anthropic.APITimeoutError) and isinstance(
        exc.__cause__, httpx2.ReadTimeout
    )


def _scrub(text: str, secret: str) -> str:
    return text.replace(secret, "[redacted]") if secret else text


def _reply_from_message(message: Message) -> _Reply:
    """A non-streamed reply: the SDK already parsed the tool input."""
    content: list[dict[str, Any]] = []
    data: Any = None
    text = ""
    for block in message.content:
        if isinstance(block, ToolUseBlock):
            content.append(
                {"type": "tool_use", "id": block.id, "name": block.name, "input": block.input}
            )
            if block.name == TOOL_NAME and data is None:
                data = block.input
                text = json.dumps(block.input)
        elif isinstance(block, TextBlock) and block.text:
            content.append({"type": "text", "text": block.text})
    if data is None:
        text = "".join(b["text"] for b in content if b["type"] == "text")
    usage = message.usage
    return _Reply(
        data=data,
        text=text,
        content=content or [{"type": "text", "text": "(no answer)"}],
        stop_reason=message.stop_reason,
        input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens,
        cache_write_tokens=usage.cache_creation_input_tokens or 0,
        cache_read_tokens=usage.cache_read_input_tokens or 0,
    )


def _reply_from_events(events: Iterable[RawMessageStreamEvent]) -> _Reply:
    """A streamed reply, put together from its events.

    The tool input arrives as ``partial_json`` pieces and is parsed once, strictly, at
    the end: an input that does not parse is an answer without data (the caller asks
    for a correction), not a failure of the call.
    """
    blocks: dict[int, _Block] = {}
    tokens = {"input": 0, "output": 0, "cache_write": 0, "cache_read": 0}
    stop_reason: str | None = None
    finished = False
    for event in events:
        if isinstance(event, RawMessageStartEvent):
            usage = event.message.usage
            tokens["input"] = usage.input_tokens
            tokens["output"] = usage.output_tokens
            tokens["cache_write"] = usage.cache_creation_input_tokens or 0
            tokens["cache_read"] = usage.cache_read_input_tokens or 0
        elif isinstance(event, RawContentBlockStartEvent):
            start = event.content_block
            if isinstance(start, ToolUseBlock):
                blocks[event.index] = _Block("tool_use", id=start.id, name=start.name)
            elif isinstance(start, TextBlock):
                blocks[event.index] = _Block("text", parts=[start.text])
        elif isinstance(event, RawContentBlockDeltaEvent):
            block = blocks.get(event.index)
            delta = event.delta
            if block is None:
                continue
            if isinstance(delta, InputJSONDelta):
                block.parts.append(delta.partial_json)
            elif isinstance(delta, TextDelta):
                block.parts.append(delta.text)
        elif isinstance(event, RawMessageDeltaEvent):
            stop_reason = event.delta.stop_reason
            # Counts in message_delta are running totals: they replace, when present.
            tokens["output"] = event.usage.output_tokens
            if event.usage.input_tokens is not None:
                tokens["input"] = event.usage.input_tokens
            if event.usage.cache_creation_input_tokens is not None:
                tokens["cache_write"] = event.usage.cache_creation_input_tokens
            if event.usage.cache_read_input_tokens is not None:
                tokens["cache_read"] = event.usage.cache_read_input_tokens
        elif isinstance(event, RawMessageStopEvent):
            finished = True
    if not finished:
        raise _IncompleteStream("the stream ended before message_stop")
    content: list[dict[str, Any]] = []
    data: Any = None
    answer: str | None = None
    for _, block in sorted(blocks.items()):
        raw = "".join(block.parts)
        if block.kind == "text":
            if raw:  # the API refuses empty text blocks
                content.append({"type": "text", "text": raw})
            continue
        parsed = _parse_object(raw)
        if parsed is None:
            # Unparseable input cannot go back as a tool_use: show the model what it sent.
            content.append({"type": "text", "text": raw})
        else:
            content.append(
                {"type": "tool_use", "id": block.id, "name": block.name, "input": parsed}
            )
        if block.name == TOOL_NAME and answer is None:
            data, answer = parsed, raw
    text = (
        answer if answer is not None else "".join(b["text"] for b in content if b["type"] == "text")
    )
    return _Reply(
        data=data,
        text=text,
        content=content or [{"type": "text", "text": "(no answer)"}],
        stop_reason=stop_reason,
        input_tokens=tokens["input"],
        output_tokens=tokens["output"],
        cache_write_tokens=tokens["cache_write"],
        cache_read_tokens=tokens["cache_read"],
    )


def _parse_object(raw: str) -> dict[str, Any] | None:
    """``raw`` as a JSON object, or None (a tool input must be an object)."""
    try:
        value = json.loads(raw) if raw.strip() else {}
    except ValueError:
        return None
    return value if isinstance(value, dict) else None
