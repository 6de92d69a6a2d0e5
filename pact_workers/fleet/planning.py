"""Answering planning calls on the fleet (``pact plan --executor celery``).

A worker that consumes ``pact.interviewer`` or ``pact.decomposer`` takes a
:class:`~pact_workers.agents.planning.PlanCall`, builds the planner its agent and
options name (keys come from the worker's environment, never from the call), asks it,
and RPUSHes one JSON reply to ``pact:plan:<id>``: the answer and its usage, or the
error with its class, so that ``pact plan`` reports it as it would in process. A call
whose message is malformed gets no reply (there is nowhere safe to send one); the
asking ``pact plan`` times out and says so.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from pydantic import ValidationError

from pact_workers.agents.planning import PlanCall, answer_call, planner_from_options
from pact_workers.errors import AgentError, InputError, SystemicAgentError, TransientAgentError
from pact_workers.fleet import keys

__all__ = ["answer_plan_call"]

log = logging.getLogger(__name__)


def answer_plan_call(message: dict[str, Any], client: Any) -> str:
    """Answer one planning call and reply through Redis; returns what happened."""
    try:
        call = PlanCall.model_validate(message)
    except ValidationError as exc:
        log.error("rejected a malformed planning call: %s", str(exc).splitlines()[0])
        return "rejected: malformed planning call"
    reply: dict[str, Any]
    try:
        answer = answer_call(planner_from_options(call.agent, call.agent_options), call)
        reply = {"data": answer.data, "usage": answer.usage.model_dump(mode="json")}
    except (AgentError, InputError) as exc:
        kind = (
            "transient"
            if isinstance(exc, TransientAgentError)
            else "systemic"
            if isinstance(exc, SystemicAgentError)
            else "permanent"
        )
        reply = {"error": str(exc), "error_class": kind}
    except Exception as exc:  # a call must always be answered
        log.exception("planning call %s failed unexpectedly", call.plan_id)
        reply = {"error": f"{type(exc).__name__}: {exc}", "error_class": "permanent"}
    key = keys.plan_reply(call.plan_id)
    pipe = client.pipeline()
    pipe.rpush(key, json.dumps(reply))
    pipe.expire(key, keys.PLAN_REPLY_TTL_S)
    pipe.execute()
    return f"{call.role} answered" if "data" in reply else f"{call.role} failed"
