"""``pact mcp``: the MCP server of a project, over stdio or streamable HTTP."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer

from scheduler.cli.app import EXIT_OK, app, user_errors
from scheduler.cli.options import given_path


@app.command()
def mcp(
    project: Annotated[
        Path | None,
        typer.Option(
            "--project",
            parser=given_path,
            envvar="PACT_PROJECT",
            help="Project directory of a run (default: the working directory, if it holds one)",
        ),
    ] = None,
    http: Annotated[
        int | None,
        typer.Option(
            "--http",
            envvar="PACT_MCP_HTTP",
            min=1,
            max=65535,
            help="Serve streamable HTTP on this port (default: stdio); needs PACT_MCP_TOKEN",
        ),
    ] = None,
    host: Annotated[
        str, typer.Option(envvar="PACT_MCP_HOST", help="Address to bind with --http")
    ] = "127.0.0.1",
    broker: Annotated[
        str | None,
        typer.Option(envvar="PACT_BROKER_URL", help="redis:// URL of the scheduler service"),
    ] = None,
) -> None:
    """Serve a project to MCP clients: status, contracts, budget, retrospective, tools."""
    from scheduler.commands.mcp import serve_mcp

    with user_errors():
        serve_mcp(
            project=project,
            cwd=Path.cwd(),
            http_port=http,
            host=host,
            broker_url=broker,
            token=os.environ.get("PACT_MCP_TOKEN"),
        )
    raise typer.Exit(EXIT_OK)
