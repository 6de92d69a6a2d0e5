"""The MCP server's resources and tools over a :class:`PactBackend`."""

from __future__ import annotations

import json
from typing import Annotated, Any, Protocol

from mcp.server import MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ToolError
from pydantic import Field

from pact_workers.errors import PactError

#: The MIME type of every resource: JSON documents.
JSON = "application/json"

#: A state-changing tool's confirmation: the JSON value ``true`` and nothing else (not
#: ``"yes"``, not ``1``, which lax validation would read as true).
Confirm = Annotated[bool, Field(strict=True, description="true to go ahead")]


class PactBackend(Protocol):
    """What the server asks; every method may raise a :class:`PactError` whose message
    goes back to the client as the error."""

    def status(self) -> dict[str, Any]: ...
    def contracts(self) -> list[dict[str, Any]]: ...
    def contract(self, component_id: str) -> dict[str, Any]: ...
    def budget(self) -> dict[str, Any]: ...
    def retrospective(self) -> dict[str, Any]: ...
    def runs(self) -> list[dict[str, Any]]: ...
    def validate(self) -> dict[str, Any]: ...
    def resume(self, *, confirm: bool, from_phase: str | None = None) -> dict[str, Any]: ...
    def submit(
        self, *, trees: list[str], confirm: bool, agent: str, replay_dir: str | None, priority: int
    ) -> dict[str, Any]: ...


def _text(doc: Any) -> str:
    return json.dumps(doc, indent=2, default=str)


def build_server(backend: PactBackend, *, version: str = "") -> MCPServer:
    """An MCP server whose resources and tools answer from ``backend``."""
    server: MCPServer = MCPServer(
        name="pact",
        title="pact-fleet",
        version=version,
        instructions=(
            "A pact-fleet project: read pact://status, pact://contracts, "
            "pact://contract/{id}, pact://budget and pact://retrospective; call "
            "pact_validate and pact_status to inspect, pact_resume and pact_submit (with "
            "confirm: true) to change things."
        ),
    )

    def read(answer: Any) -> str:
        try:
            return _text(answer())
        except (PactError, ValueError) as exc:
            raise ResourceError(str(exc)) from None

    def call(answer: Any) -> str:
        try:
            return _text(answer())
        except (PactError, ValueError) as exc:
            raise ToolError(str(exc)) from None

    @server.resource("pact://status", name="status", mime_type=JSON)
    def status_resource() -> str:
        """The run's state: status, items, cost, components, provenance."""
        return read(backend.status)

    @server.resource("pact://contracts", name="contracts", mime_type=JSON)
    def contracts_resource() -> str:
        """Every promoted contract, summarised."""
        return read(backend.contracts)

    @server.resource("pact://contract/{component_id}", name="contract", mime_type=JSON)
    def contract_resource(component_id: str) -> str:
        """One component's promoted contract (interface.json), whole."""
        return read(lambda: backend.contract(component_id))

    @server.resource("pact://budget", name="budget", mime_type=JSON)
    def budget_resource() -> str:
        """Spend against the budget, by phase."""
        return read(backend.budget)

    @server.resource("pact://retrospective", name="retrospective", mime_type=JSON)
    def retrospective_resource() -> str:
        """The latest retrospective: cost, failure patterns, lessons."""
        return read(backend.retrospective)

    @server.resource("pact://runs", name="runs", mime_type=JSON)
    def runs_resource() -> str:
        """The scheduler service's runs (when the server was given a broker)."""
        return read(backend.runs)

    @server.tool(name="pact_validate")
    def pact_validate() -> str:
        """Validate the project's contracts; every finding and drift, structured."""
        return call(backend.validate)

    @server.tool(name="pact_status")
    def pact_status() -> str:
        """The run's detailed status, with drift and staleness."""
        return call(backend.status)

    @server.tool(name="pact_resume")
    def pact_resume(confirm: Confirm = False, from_phase: str | None = None) -> str:
        """Resume the failed, paused or interrupted run. Changes the run: refused
        unless confirm is true."""
        return call(lambda: backend.resume(confirm=confirm, from_phase=from_phase))

    @server.tool(name="pact_submit")
    def pact_submit(
        trees: list[str],
        confirm: Confirm = False,
        agent: str = "replay",
        replay_dir: str | None = None,
        priority: int = 0,
    ) -> str:
        """Submit tree files to the scheduler service as runs. Changes things: refused
        unless confirm is true."""
        return call(
            lambda: backend.submit(
                trees=trees,
                confirm=confirm,
                agent=agent,
                replay_dir=replay_dir,
                priority=priority,
            )
        )

    return server
