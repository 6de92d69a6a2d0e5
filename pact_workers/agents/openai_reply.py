"""A Chat Completions answer, read into what the OpenAI backend needs.

The answer is the arguments of the one function the model is forced to call: a whole
completion, or chunks of a stream (the call's name and arguments arrive in pieces, the
usage in a last chunk of its own). Arguments that are not JSON (a fenced block is
accepted) parse to None, so that the caller asks for a correction; the correction goes
after the assistant's own turn, repeated by :func:`assistant_turn`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from openai.types import CompletionUsage
from openai.types.chat import ChatCompletion, ChatCompletionChunk, ChatCompletionMessageParam

__all__ = ["Answer", "answer_from_chunks", "answer_from_completion", "assistant_turn", "parse_json"]

_FENCE = re.compile(r"^```[A-Za-z0-9_-]*\s*\n?(.*?)\n?```$", re.DOTALL)


@dataclass
class Answer:
    """What one call returned, whether streamed or not."""

    arguments: str | None = None  # the forced function call's arguments, as sent
    content: str = ""  # plain text the model sent instead (or besides)
    tool_call_id: str | None = None
    tool_name: str | None = None
    finish_reason: str | None = None
    usage: CompletionUsage | None = None
    #: The model that answered, as the API names it (empty when it did not say).
    model: str = ""

    @property
    def text(self) -> str:
        return self.arguments if self.arguments is not None else self.content


def answer_from_completion(completion: ChatCompletion, function: str) -> Answer:
    """A non-streamed answer: the first choice's message and its function call."""
    answer = Answer(usage=completion.usage, model=completion.model or "")
    if completion.choices:
        first = completion.choices[0]
        answer.finish_reason = first.finish_reason
        message = first.message
        answer.content = message.content or message.refusal or ""
        for call in message.tool_calls or []:
            if call.type == "function" and (
                answer.arguments is None or call.function.name == function
            ):
                answer.arguments = call.function.arguments
                answer.tool_call_id = call.id
                answer.tool_name = call.function.name
    return answer


def answer_from_chunks(chunks: Iterable[ChatCompletionChunk], function: str) -> Answer:
    """A streamed answer, put together from its chunks (choice 0 only)."""
    answer = Answer()
    calls: dict[int, dict[str, Any]] = {}
    content: list[str] = []
    for chunk in chunks:
        if chunk.usage is not None:
            answer.usage = chunk.usage
        answer.model = chunk.model or answer.model
        for part in chunk.choices:
            if part.index != 0:
                continue
            if part.finish_reason is not None:
                answer.finish_reason = part.finish_reason
            delta = part.delta
            content.append(delta.content or delta.refusal or "")
            for call_delta in delta.tool_calls or []:
                acc = calls.setdefault(call_delta.index, {"id": None, "name": "", "arguments": []})
                acc["id"] = call_delta.id or acc["id"]
                if call_delta.function is not None:
                    acc["name"] += call_delta.function.name or ""
                    acc["arguments"].append(call_delta.function.arguments or "")
    answer.content = "".join(content)
    chosen = [c for c in calls.values() if c["name"] == function] or list(calls.values())
    if chosen:
        answer.arguments = "".join(chosen[0]["arguments"])
        answer.tool_call_id = chosen[0]["id"]
        answer.tool_name = chosen[0]["name"] or function
    return answer


def assistant_turn(answer: Answer, function: str) -> list[ChatCompletionMessageParam]:
    """The messages that repeat ``answer`` to the model before a correction."""
    if answer.arguments is None:
        return [{"role": "assistant", "content": answer.content}]
    call_id = answer.tool_call_id or "call_0"
    return [
        {
            "role": "assistant",
            "content": answer.content or None,
            "tool_calls": [
                {
                    "id": call_id,
                    "type": "function",
                    "function": {
                        "name": answer.tool_name or function,
                        "arguments": answer.arguments,
                    },
                }
            ],
        },
        # A tool call must be answered before the conversation goes on.
        {"role": "tool", "tool_call_id": call_id, "content": "Not accepted; see below."},
    ]


def parse_json(text: str) -> Any:
    """The JSON value of an answer (a fenced block too), or None when it is not JSON."""
    stripped = text.strip()
    fenced = _FENCE.match(stripped)
    if fenced:
        stripped = fenced.group(1).strip()
    if not stripped:
        return None
    try:
        return json.loads(stripped)
    except ValueError:
        return None
