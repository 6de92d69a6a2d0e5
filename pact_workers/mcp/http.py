"""The MCP server over streamable HTTP, behind a bearer token.

Every request must carry ``Authorization: Bearer <token>`` (compared in constant time);
any other gets 401 before the MCP app sees it. The server binds to 127.0.0.1 unless
another host is named.
"""

from __future__ import annotations

import hmac
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from mcp.server import MCPServer

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]

#: Where the MCP endpoint lives.
PATH = "/mcp"


class BearerToken:
    """ASGI middleware: only requests bearing ``token`` reach ``app``."""

    def __init__(self, app: App, token: str) -> None:
        if not token:
            raise ValueError("an empty token would let anyone in")
        self.app = app
        self.expected = f"Bearer {token}".encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            given = dict(scope.get("headers") or []).get(b"authorization", b"")
            if not hmac.compare_digest(given, self.expected):
                await _unauthorized(send)
                return
        await self.app(scope, receive, send)


async def _unauthorized(send: Send) -> None:
    body = b'{"error": "unauthorized: send Authorization: Bearer <PACT_MCP_TOKEN>"}'
    await send(
        {
            "type": "http.response.start",
            "status": 401,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"www-authenticate", b'Bearer realm="pact"'),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


def http_app(server: MCPServer, *, token: str, host: str = "127.0.0.1") -> App:
    """The server's streamable HTTP app at :data:`PATH`, behind ``token``."""
    app: App = server.streamable_http_app(streamable_http_path=PATH, host=host)
    return BearerToken(app, token)


def serve_http(server: MCPServer, *, token: str, port: int, host: str = "127.0.0.1") -> None:
    """Serve until interrupted."""
    import uvicorn

    uvicorn.run(http_app(server, token=token, host=host), host=host, port=port, log_level="warning")
