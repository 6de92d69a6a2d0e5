"""What one Chat Completions request of the OpenAI backend carries.

The role's JSON schema goes out as the parameters of one function (``submit_<role>``)
the model is forced to call: function calling is the structured-output feature
OpenAI-compatible servers support most widely. A :class:`Conversation` is one thread's
exchange for one prompt, kept so that a correction follows the model's own answer.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from openai.types.chat import (
    ChatCompletionFunctionToolParam,
    ChatCompletionMessageParam,
    ChatCompletionNamedToolChoiceParam,
)

from pact_workers.agents.roles import Prompt
from pact_workers.models.work import Role

__all__ = ["Conversation", "forced_function", "function_name"]


@dataclass
class Conversation:
    """This thread's exchange for one prompt, kept so that a correction follows it."""

    prompt: Prompt
    messages: list[ChatCompletionMessageParam] = field(default_factory=list)

    @classmethod
    def start(cls, prompt: Prompt) -> Conversation:
        """The system prompt and the user prompt, nothing answered yet."""
        return cls(
            prompt,
            [
                {"role": "system", "content": prompt.system},
                {"role": "user", "content": prompt.user},
            ],
        )


def function_name(role: Role) -> str:
    """The function whose arguments are the role's answer."""
    return f"submit_{role.value}"


def forced_function(
    function: str, schema: dict[str, Any]
) -> tuple[list[ChatCompletionFunctionToolParam], ChatCompletionNamedToolChoiceParam]:
    """``tools`` (one function taking ``schema``) and the ``tool_choice`` that forces it."""
    tools: list[ChatCompletionFunctionToolParam] = [
        {
            "type": "function",
            "function": {
                "name": function,
                "description": "Submit your answer: the arguments are the answer itself.",
                "parameters": schema,
            },
        }
    ]
    choice: ChatCompletionNamedToolChoiceParam = {
        "type": "function",
        "function": {"name": function},
    }
    return tools, choice
