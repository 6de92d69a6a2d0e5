"""The Anthropic API's reply, read into what the backend needs: one model turn.

A non-streamed reply is a whole ``Message`` the SDK already parsed. A streamed one is
put together from its events: the tool input arrives as ``partial_json`` pieces and is
parsed once, strictly, at the end; an input that does not parse is an answer without
data (the caller asks for a correction), not a failure of the call. A stream that ends
before ``message_stop`` is :class:`IncompleteStream` (a connection failure, retried).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

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

from pact_workers.agents.anthropic_request import TOOL_NAME

__all__ = ["CUT_OFF", "IncompleteStream", "Reply", "reply_from_events", "reply_from_message"]

#: Stop reasons after which an unusable answer will not get better by asking again.
CUT_OFF = frozenset({"max_tokens", "model_context_window_exceeded"})


class IncompleteStream(Exception):
    """The stream ended (cleanly, at the HTTP level) before ``message_stop``."""


@dataclass(frozen=True)
class Reply:
    """One model turn, as the backend needs it."""

    data: Any  # the tool input (a dict), or None when there was none that parses
    text: str  # the raw tool input, or the prose when the model did not call the tool
    content: list[dict[str, Any]]  # the assistant turn, to send back with a correction
    stop_reason: str | None
    input_tokens: int
    output_tokens: int
    cache_write_tokens: int
    cache_read_tokens: int
    #: The model that answered, as the API names it (empty when it did not say).
    model: str = ""


@dataclass
class _Block:
    kind: str  # "tool_use" or "text"
    id: str = ""
    name: str = ""
    parts: list[str] = field(default_factory=list)


def reply_from_message(message: Message) -> Reply:
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
    return Reply(
        data=data,
        text=text,
        content=content or [{"type": "text", "text": "(no answer)"}],
        stop_reason=message.stop_reason,
        input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens,
        cache_write_tokens=usage.cache_creation_input_tokens or 0,
        cache_read_tokens=usage.cache_read_input_tokens or 0,
        model=message.model or "",
    )


def reply_from_events(events: Iterable[RawMessageStreamEvent]) -> Reply:
    """A streamed reply, put together from its events.

    Raises:
        IncompleteStream: the events ended before ``message_stop``.
    """
    blocks: dict[int, _Block] = {}
    tokens = {"input": 0, "output": 0, "cache_write": 0, "cache_read": 0}
    stop_reason: str | None = None
    finished = False
    model = ""
    for event in events:
        if isinstance(event, RawMessageStartEvent):
            model = event.message.model or ""
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
        raise IncompleteStream("the stream ended before message_stop")
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
    return Reply(
        data=data,
        text=text,
        content=content or [{"type": "text", "text": "(no answer)"}],
        stop_reason=stop_reason,
        input_tokens=tokens["input"],
        output_tokens=tokens["output"],
        cache_write_tokens=tokens["cache_write"],
        cache_read_tokens=tokens["cache_read"],
        model=model,
    )


def _parse_object(raw: str) -> dict[str, Any] | None:
    """``raw`` as a JSON object, or None (a tool input must be an object)."""
    try:
        value = json.loads(raw) if raw.strip() else {}
    except ValueError:
        return None
    return value if isinstance(value, dict) else None
