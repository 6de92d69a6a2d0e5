"""The MCP server over streamable HTTP, behind a bearer token.

Every request must carry ``Authorization: Bearer <token>`` (compared in constant time);
any other gets 401 before the MCP app sees it. The server binds to 127.0.0.1 unless
another host is named.
"""

from __future__ import annotations

import hmac
import socket
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


def listen(host: str, port: int) -> list[socket.socket]:
    """Sockets bound to ``port`` on every address ``host`` resolves to (as asyncio binds
    them), not yet listening: a host that does not resolve or an address in use fails
    here, before the server starts, rather than in uvicorn (which exits on it).

    Raises:
        OSError: ``host`` does not resolve (:class:`socket.gaierror`) or an address
            cannot be bound.
        UnicodeError: ``host`` is not a valid host name.
    """
    found = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    bound: list[socket.socket] = []
    try:
        for family, kind, proto, _, address in dict.fromkeys(found):
            sock = socket.socket(family, kind, proto)
            bound.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            sock.bind(address)
    except BaseException:
        for sock in bound:
            sock.close()
        raise
    return bound


def serve_http(
    server: MCPServer, *, token: str, sockets: list[socket.socket], host: str = "127.0.0.1"
) -> None:
    """Serve on ``sockets`` (from :func:`listen`) until interrupted; closes them."""
    import uvicorn

    config = uvicorn.Config(http_app(server, token=token, host=host), log_level="warning")
    try:
        uvicorn.Server(config).run(sockets=sockets)
    except KeyboardInterrupt:  # as uvicorn.run: an interrupt is how it stops
        pass
    finally:
        for sock in sockets:
            sock.close()
