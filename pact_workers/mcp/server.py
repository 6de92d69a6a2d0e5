"""The MCP server's resources and tools over a :class:`PactBackend`.

Arguments are checked at the edge, as the CLI checks its options:

- An argument a tool does not take is refused, naming it (the SDK would drop it: a
  client asking ``pact_validate`` for ``path: /etc`` got the project's report).
- Yes/no and numbers are strict: ``"yes"`` or ``1`` is no ``true``, ``"3"`` or ``true``
  no priority.
- Strings are bounded (a path by ``PATH_MAX``, a name by :data:`MAX_NAME`), so a refusal
  never echoes megabytes back.
- A refusal reads ``tool: field: problem``, never pydantic's report of it.
- The server logs at WARNING: the SDK logs every refused request at INFO through rich,
  with the client's text in it, and formatting a 4 MB argument held up every session
  for seconds.

``pact_resume`` drives the whole run before it answers. A client that sends a progress
token with the call is told, as it goes, how many items are finished out of all (at
most four times a second, and at the end); one that sends none is told nothing. A
client that cancels the call stops the run as Ctrl-C stops ``pact resume``: after the
current step, interrupted, for a later resume.
"""

from __future__ import annotations

import inspect
import json
import logging
import threading
from collections.abc import Callable
from typing import Annotated, Any, Protocol, TypeVar

import anyio.from_thread
import anyio.to_thread
from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ResourceError, ToolError, UnexpectedToolError
from pydantic import Field, ValidationError

from pact_workers.errors import PactError
from pact_workers.fleet.keys import MAX_PRIORITY
from pact_workers.models.documents import validation_problems

#: The MIME type of every resource: JSON documents.
JSON = "application/json"

#: The longest path a tool takes (Linux's PATH_MAX) and the longest name (agent, phase).
MAX_PATH, MAX_NAME = 4096, 100

#: A state-changing tool's confirmation: the JSON value ``true`` and nothing else (not
#: ``"yes"``, not ``1``, which lax validation would read as true).
Confirm = Annotated[bool, Field(strict=True, description="true to go ahead")]
PathText = Annotated[str, Field(max_length=MAX_PATH)]
Name = Annotated[str, Field(max_length=MAX_NAME)]

F = TypeVar("F", bound=Callable[..., Any])

#: How far a long tool has come: (items finished, items in all, what just happened).
Progress = Callable[[int, int, str], None]

log = logging.getLogger(__name__)


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
    def resume(
        self,
        *,
        confirm: bool,
        from_phase: str | None = None,
        progress: Progress | None = None,
        stop: threading.Event | None = None,
    ) -> dict[str, Any]: ...
    def submit(
        self, *, trees: list[str], confirm: bool, agent: str, replay_dir: str | None, priority: int
    ) -> dict[str, Any]: ...


def _text(doc: Any) -> str:
    return json.dumps(doc, indent=2, default=str)


class PactServer(MCPServer):
    """An :class:`MCPServer` whose tools refuse arguments they do not take, and whose
    argument errors name the tool and the field (see the module docstring)."""

    def __init__(self, **settings: Any) -> None:
        super().__init__(log_level="WARNING", **settings)
        #: Each tool's arguments, by tool name.
        self.arguments: dict[str, tuple[str, ...]] = {}

    def pact_tool(self, name: str) -> Callable[[F], F]:
        """Register a tool as :meth:`MCPServer.tool` does, and remember its arguments."""

        def register(fn: F) -> F:
            # The request's context is the SDK's to pass, not a client's argument.
            self.arguments[name] = tuple(
                parameter.name
                for parameter in inspect.signature(fn).parameters.values()
                if parameter.annotation not in (Context, "Context")
            )
            return self.tool(name=name)(fn)

        return register

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[Any, Any] | None = None
    ) -> Any:
        taken = self.arguments.get(name)
        unknown = sorted(set(arguments) - set(taken)) if taken is not None else []
        if unknown:
            takes = f"it takes {', '.join(taken)}" if taken else "it takes no arguments"
            raise ToolError(
                f"{name}: no argument {', '.join(repr(u[:MAX_NAME]) for u in unknown[:5])}; {takes}"
            )
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            cause = exc.__cause__
            if isinstance(exc, UnexpectedToolError) or not isinstance(cause, ValidationError):
                raise
            raise ToolError(
                f"{name}: {validation_problems(cause, 'arguments')}; see the tool's input schema"
            ) from cause


def build_server(backend: PactBackend, *, version: str = "") -> MCPServer:
    """An MCP server whose resources and tools answer from ``backend``."""
    server = PactServer(
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

    @server.pact_tool("pact_validate")
    def pact_validate() -> str:
        """Validate the project's contracts; every finding and drift, structured."""
        return call(backend.validate)

    @server.pact_tool("pact_status")
    def pact_status() -> str:
        """The run's detailed status, with drift and staleness."""
        return call(backend.status)

    @server.pact_tool("pact_resume")
    async def pact_resume(
        ctx: Context, confirm: Confirm = False, from_phase: Name | None = None
    ) -> str:
        """Resume the failed, paused or interrupted run. Changes the run: refused
        unless confirm is true. Reports progress (items finished out of all) to a
        client that asks for it; cancelling the call stops the run, for a later resume."""
        progress = _ProgressNotices(ctx)
        stop = threading.Event()
        try:
            return await anyio.to_thread.run_sync(
                lambda: call(
                    lambda: backend.resume(
                        confirm=confirm, from_phase=from_phase, progress=progress, stop=stop
                    )
                ),
                abandon_on_cancel=True,
            )
        except anyio.get_cancelled_exc_class():
            stop.set()  # the client cancelled the call: the run stops after this step
            raise

    @server.pact_tool("pact_submit")
    def pact_submit(
        trees: Annotated[list[PathText], Field(min_length=1)],
        confirm: Confirm = False,
        agent: Name = "replay",
        replay_dir: PathText | None = None,
        priority: Annotated[int, Field(strict=True, ge=0, le=MAX_PRIORITY)] = 0,
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


class _ProgressNotices:
    """A :data:`Progress` that sends MCP progress notifications for the request of
    ``ctx``, from the thread a tool works in. A notification that cannot be sent (the
    client went away) stops the notices, never the work: the run goes on to its end."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.failed = False

    def __call__(self, done: int, total: int, message: str) -> None:
        if self.failed:
            return
        try:
            anyio.from_thread.run(self.ctx.report_progress, done, total, message)
        except Exception as exc:  # the run must not fail for a notice
            self.failed = True
            log.warning("progress notices stopped: %s", exc)
