"""The noop agent: the smallest output each role accepts, instantly.

It measures the fleet's own overhead (dispatch, queues, artifact store, result
stream) with no model and no real work, and lets an operator check that a new
worker can take tasks. A contract names no dependencies; a test suite has one
test; an implementation defines the module its tests import.
"""

from __future__ import annotations

import json

from pact_workers.agents.base import AgentOutput, AgentRequest
from pact_workers.models.work import Phase


class NoopAgent:
    name = "noop"

    def produce(self, request: AgentRequest) -> AgentOutput:
        cid = request.component_id
        if request.phase is Phase.CONTRACT:
            doc = {"component_id": cid, "name": cid, "description": f"{cid} (noop contract)"}
            return AgentOutput(files={"interface.json": json.dumps(doc).encode()}, model="noop")
        if request.phase is Phase.TEST:
            test = f"import {cid}\n\n\ndef test_{cid}_exists():\n    assert {cid}.NOOP\n"
            return AgentOutput(files={"tests/contract_test.py": test.encode()}, model="noop")
        return AgentOutput(files={f"src/{cid}.py": b"NOOP = True\n"}, model="noop")
