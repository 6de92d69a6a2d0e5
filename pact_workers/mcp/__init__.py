"""The MCP server (seed 000, 6.5): a project's run, contracts, budget and retrospective
for any MCP client, over stdio or streamable HTTP.

The rules:

- Resources are read-only: ``pact://status``, ``pact://contracts``,
  ``pact://contract/{id}``, ``pact://budget``, ``pact://retrospective``, and
  ``pact://runs`` for the scheduler service.
- Tools: ``pact_validate`` and ``pact_status`` read; ``pact_resume`` and
  ``pact_submit`` change things and are refused unless called with ``confirm: true``.
- The server answers through a :class:`~pact_workers.mcp.server.PactBackend` (the CLI's
  own command functions, bound by ``pact mcp``); this package imports nothing of the
  scheduler.
- It starts without a project and answers every request with an error saying how to
  give one.
- Over HTTP it binds to 127.0.0.1 unless told otherwise, and every request must carry
  ``Authorization: Bearer <PACT_MCP_TOKEN>``; anything else gets 401.

The MCP SDK is the optional extra ``mcp`` (``pip install 'pact-fleet[mcp]'``).
"""

from __future__ import annotations

from pact_workers.mcp.server import PactBackend, build_server

__all__ = ["PactBackend", "build_server"]
