"""What one Messages API request of the Anthropic backend carries.

The answer is the input of one tool (``emit_answer``) whose ``input_schema`` is the
role's JSON schema, and ``tool_choice`` forces the model to call it. The stable prefix
(the tool and the role's system prompt) carries ``cache_control`` so that prompt
caching keeps it warm across components. A correction continues the previous exchange:
the assistant's turn goes back, and every ``tool_use`` in it is answered by a
``tool_result`` that carries the problem (the API requires the pairing).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pact_workers.agents.roles import Prompt
from pact_workers.models.work import Role

__all__ = ["CACHE_CONTROL", "TOOL_NAME", "Exchange", "messages_for", "request_fields"]

#: The tool whose input is the answer.
TOOL_NAME = "emit_answer"
#: Marks the stable prefix (tool, system prompt) for prompt caching.
CACHE_CONTROL = {"type": "ephemeral"}


@dataclass(frozen=True)
class Exchange:
    """The last call of one thread: what a correction continues."""

    prompt: Prompt
    messages: list[dict[str, Any]]
    reply: list[dict[str, Any]]


def messages_for(
    prompt: Prompt, correction: str | None, last: Exchange | None
) -> list[dict[str, Any]]:
    """The turns to send: the prompt, or ``last`` exchange and a correction after it."""
    first = {"role": "user", "content": [{"type": "text", "text": prompt.user}]}
    if correction is None:
        return [first]
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


def request_fields(prompt: Prompt, role: Role, schema: dict[str, Any]) -> dict[str, Any]:
    """``system``, ``tools`` and ``tool_choice`` of a request: the cached prefix and the
    forced tool."""
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
    return {"system": system, "tools": [tool], "tool_choice": choice}
