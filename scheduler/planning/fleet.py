"""The planning roles on the fleet: each call goes to a worker through its role's queue.

:class:`FleetPlanner` sends a :class:`~pact_workers.agents.planning.PlanCall` to
``pact.interviewer`` or ``pact.decomposer`` as a Celery task, like every other role's
work, and waits for the worker's answer on ``pact:plan:<id>`` (BLPOP). A worker's
error comes back as the agent error it was (a transient, permanent or systemic one);
no answer within the timeout is a planning error that names the queue no worker served.
"""

from __future__ import annotations

import secrets
from typing import Any

from celery import Celery
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator
from redis.exceptions import ResponseError

from pact_workers.agents.planning import PlanAnswer, PlanCall
from pact_workers.app import QUEUES, TASK_NAMES, fleet_config
from pact_workers.errors import (
    PermanentAgentError,
    SystemicAgentError,
    TransientAgentError,
)
from pact_workers.fleet import keys
from pact_workers.fleet.connection import redis_from_url
from pact_workers.fleet.wire import discard, is_wrong_type
from pact_workers.models.documents import validation_problems
from pact_workers.models.work import Usage
from scheduler.planning.plan import PlanningError

__all__ = ["FleetPlanner", "PlanReply"]

#: How long one planning call may take on a worker, queueing included.
DEFAULT_TIMEOUT_S = 900.0


class FleetPlanner:
    """A planner whose calls are answered by the fleet's workers."""

    def __init__(
        self,
        broker_url: str,
        *,
        agent: str,
        agent_options: dict[str, str],
        timeout_s: float = DEFAULT_TIMEOUT_S,
    ) -> None:
        self.name = f"{agent} (fleet)"
        self.agent = agent
        self.agent_options = dict(agent_options)
        self.timeout_s = timeout_s
        self.client = redis_from_url(broker_url)
        self.celery = Celery("pact_planner", set_as_current=False)
        self.celery.conf.update(fleet_config(broker_url))

    def interview(self, task: str) -> PlanAnswer:
        return self._ask(PlanCall(**self._call("interviewer"), task=task))

    def decompose(
        self, task: str, interview: dict[str, Any], *, attempt: int, feedback: list[str]
    ) -> PlanAnswer:
        call = PlanCall(
            **self._call("decomposer"),
            task=task,
            interview=interview,
            attempt=attempt,
            feedback=feedback,
        )
        return self._ask(call)

    def _call(self, role: str) -> dict[str, Any]:
        return {
            "plan_id": secrets.token_hex(8),
            "role": role,
            "agent": self.agent,
            "agent_options": self.agent_options,
        }

    def _ask(self, call: PlanCall) -> PlanAnswer:
        key = keys.plan_reply(call.plan_id)
        self.celery.send_task(
            TASK_NAMES[call.role],
            args=[call.model_dump(mode="json")],
            queue=QUEUES[call.role],
            task_id=f"plan-{call.role}-{call.plan_id}",
        )
        try:
            popped = self.client.blpop([key], timeout=self.timeout_s)
        except ResponseError as exc:
            if not is_wrong_type(exc):
                raise
            discard(self.client, key, expected="list", what="the answer to a planning call")
            raise PlanningError(
                f"{key} was a key of another type, not a planning answer: no answer "
                f"could arrive there; run `pact plan` again"
            ) from None
        if popped is None:
            raise PlanningError(
                f"no answer from the {call.role} within {self.timeout_s:g} s: is a worker "
                f"serving {QUEUES[call.role]}? (`pact worker --roles {call.role} --broker URL`)"
            )
        self.client.delete(key)
        reply = _reply(key, popped[1])
        if reply.error is not None:
            error = {
                "transient": TransientAgentError,
                "systemic": SystemicAgentError,
            }.get(reply.error_class, PermanentAgentError)
            raise error(f"{call.role}: {reply.error}")
        return PlanAnswer(data=reply.data, usage=reply.usage)

    def close(self) -> None:
        self.client.close()


class PlanReply(BaseModel):
    """A worker's answer on ``pact:plan:<id>``: the answer and its usage, or the error."""

    model_config = ConfigDict(extra="ignore")

    data: Any = None
    usage: Usage = Field(default_factory=Usage)
    error: str | None = None
    error_class: str = ""

    @model_validator(mode="after")
    def _answer_or_error(self) -> PlanReply:
        if self.error is None and "data" not in self.model_fields_set:
            raise ValueError("neither an answer ('data') nor an error ('error')")
        return self


def _reply(key: str, raw: bytes | str) -> PlanReply:
    """The answer in ``raw``, read from ``key``.

    Raises:
        PlanningError: ``raw`` is not an answer (anyone can write to Redis), naming
            the key and what is wrong.
    """
    try:
        return PlanReply.model_validate_json(raw)
    except ValidationError as exc:
        problem = validation_problems(exc, "the answer", limit=3)
        raise PlanningError(
            f"{key} held {raw[:80]!r}, not a planning answer ({problem}); is every worker "
            "serving the planning roles of this pact-fleet's version?"
        ) from None
