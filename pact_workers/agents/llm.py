"""Agents backed by a language model API: one structured call per attempt.

A backend (``anthropic``, ``openai``) turns a :class:`Prompt` and the role's JSON
schema into a parsed answer and token counts; :class:`StructuredAgent` validates the
answer against the role's schema and, when it does not match, asks again with the
problem spelled out, a bounded number of times. Backends translate their SDK's
errors: transient ones (408, 429, 5xx, connection, a stalled stream) become
TransientAgentError after their own capped retries, a bad request PermanentAgentError,
bad credentials or an unknown model SystemicAgentError.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from pact_workers.agents.base import AgentOutput, AgentRequest
from pact_workers.agents.roles import (
    OutputSchemaError,
    Prompt,
    files_from_output,
    render_prompt,
    request_schema,
)
from pact_workers.models.work import Role, Usage

#: Correction prompts after a malformed answer, before the attempt fails.
MAX_CORRECTIONS = 2


@dataclass(frozen=True)
class Completion:
    """One model call: the parsed answer (None when it was not JSON) and what it cost."""

    data: Any
    usage: Usage = field(default_factory=Usage)
    text: str = ""
    #: The model that answered, as the provider reported it (empty: not reported).
    model: str = ""


class LLMBackend(Protocol):
    name: str
    model: str

    def complete(
        self,
        prompt: Prompt,
        *,
        role: Role,
        schema: dict[str, Any],
        correction: str | None = None,
    ) -> Completion:
        """Ask once (a correction says what was wrong with the previous answer)."""
        ...


class StructuredAgent:
    """An Agent over an LLM backend: prompt, structured answer, validation, correction."""

    def __init__(self, backend: LLMBackend, *, max_corrections: int = MAX_CORRECTIONS) -> None:
        self.backend = backend
        self.max_corrections = max_corrections
        self.name = f"{backend.name}:{backend.model}"

    def produce(self, request: AgentRequest) -> AgentOutput:
        prompt = render_prompt(request)
        schema = request_schema(request)
        usage = Usage()
        correction: str | None = None
        for _ in range(1 + self.max_corrections):
            completion = self.backend.complete(
                prompt, role=request.role, schema=schema, correction=correction
            )
            usage = usage + completion.usage
            if completion.data is None:
                correction = "The answer was not valid JSON. Answer with one JSON object only."
                continue
            try:
                files = files_from_output(request, completion.data)
            except OutputSchemaError as exc:
                correction = f"{exc}. Answer again with a corrected JSON object."
                continue
            # The model the provider says answered, which may differ from the one asked
            # for (an alias resolved to a dated version): provenance records the former.
            return AgentOutput(
                files=files, usage=usage, model=completion.model or self.backend.model
            )
        raise OutputSchemaError(
            f"{self.name}: no valid answer after {self.max_corrections} corrections: {correction}"
        )
