"""The planning roles on the fleet: each call goes to a worker through its role's queue.

:class:`FleetPlanner` sends a :class:`~pact_workers.agents.planning.PlanCall` to
``pact.interviewer`` or ``pact.decomposer`` as a Celery task, like every other role's
work, and waits for the worker's answer on ``pact:plan:<id>`` (BLPOP). A worker's
error comes back as the agent error it was (a transient, permanent or systemic one);
no answer within the timeout is a planning error that names the queue no worker served.
"""

from __future__ import annotations

import json
import secrets
from typing import Any

from celery import Celery

from pact_workers.agents.planning import PlanAnswer, PlanCall
from pact_workers.app import QUEUES, TASK_NAMES, fleet_config
from pact_workers.errors import (
    PermanentAgentError,
    SystemicAgentError,
    TransientAgentError,
)
from pact_workers.fleet import keys
from pact_workers.fleet.connection import redis_from_url
from pact_workers.models.work import Usage
from scheduler.planning.plan import PlanningError

__all__ = ["FleetPlanner"]

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
        popped = self.client.blpop([key], timeout=self.timeout_s)
        if popped is None:
            raise PlanningError(
                f"no answer from the {call.role} within {self.timeout_s:g} s: is a worker "
                f"serving {QUEUES[call.role]}? (`pact worker --roles {call.role} --broker URL`)"
            )
        self.client.delete(key)
        reply = json.loads(popped[1])
        if "error" in reply:
            error = {
                "transient": TransientAgentError,
                "systemic": SystemicAgentError,
            }.get(reply.get("error_class", ""), PermanentAgentError)
            raise error(f"{call.role}: {reply['error']}")
        return PlanAnswer(data=reply["data"], usage=Usage.model_validate(reply.get("usage", {})))

    def close(self) -> None:
        self.client.close()
