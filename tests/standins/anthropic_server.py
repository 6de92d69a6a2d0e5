"""A local stand-in for the Anthropic Messages API, for tests that must not leave the machine.

It serves ``POST /v1/messages`` on 127.0.0.1 with the wire format the official SDK
reads: a JSON ``message`` reply, or (``"stream": true``) a server-sent-event stream of
``message_start``, ``content_block_start``, ``ping``, ``content_block_delta``
(``input_json_delta`` / ``text_delta``), ``content_block_stop``, ``message_delta`` (with
the usage, cache fields included) and ``message_stop``; errors come as the API's error
body (``{"type": "error", "error": {"type": ..., "message": ...}}``) with its status and
an optional ``retry-after``. There is no model behind it: each test scripts its replies,
in order, and reads back every request it received (the API key's value redacted).

Like the real API it checks the credentials (``x-api-key: KEY`` or ``Authorization:
Bearer KEY``), the ``anthropic-version`` header, the required fields and that every
``tool_use`` of an assistant turn is answered by a ``tool_result`` in the next user turn;
a request that fails a check gets the API's 401 or 400 and does not use up a reply.

Usage::

    with AnthropicStandIn(api_key="sk-test") as api:
        api.script(ErrorReply(429, "rate_limit_error", "slow down"), ToolAnswer({...}))
        ...  # point the SDK at api.url
        assert api.requests[1].body["tool_choice"] == {...}
"""

from __future__ import annotations

import itertools
import json
import socket
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

__all__ = [
    "REDACTED",
    "AnthropicStandIn",
    "ErrorReply",
    "MalformedToolInput",
    "RecordedRequest",
    "Reply",
    "Stall",
    "TextAnswer",
    "ToolAnswer",
]

#: What a recorded header holds instead of the API key.
REDACTED = "<redacted>"


@dataclass(frozen=True)
class ToolAnswer:
    """The model calls the forced tool with ``data`` as its input (any JSON value, so a
    test can send one that the role's schema rejects)."""

    data: Any
    input_tokens: int = 120
    output_tokens: int = 60
    cache_write_tokens: int = 0
    cache_read_tokens: int = 0
    #: A stream sends the input's JSON in ``partial_json`` pieces of this many characters.
    chunk_chars: int = 24


@dataclass(frozen=True)
class MalformedToolInput:
    """A tool call whose input does not parse.

    A stream sends ``partial_json`` as it is; a JSON reply, which cannot hold unparsed
    input, carries ``"input": {}``. ``stop_reason="max_tokens"`` plays an answer cut off
    by the output limit.
    """

    partial_json: str = '{"component_id": "calc", "name": "Calc", "description": '
    input_tokens: int = 120
    output_tokens: int = 60
    stop_reason: str = "tool_use"


@dataclass(frozen=True)
class TextAnswer:
    """The model answers in prose, without calling the tool."""

    text: str
    input_tokens: int = 120
    output_tokens: int = 20


@dataclass(frozen=True)
class ErrorReply:
    """An HTTP error with the API's error body; ``in_stream``: to a streaming request, a
    200 stream that sends ``message_start`` and then an ``error`` event (as the API does
    when it is overloaded mid-answer)."""

    status: int
    error_type: str
    message: str
    retry_after: str | None = None
    in_stream: bool = False


@dataclass(frozen=True)
class Stall:
    """Silence for ``seconds``: a stream sends ``message_start`` first, a JSON reply sends
    nothing at all (not even the headers). Then the connection is closed."""

    seconds: float = 30.0
    input_tokens: int = 120


Reply = ToolAnswer | MalformedToolInput | TextAnswer | ErrorReply | Stall


@dataclass(frozen=True)
class RecordedRequest:
    """One request as the stand-in received it."""

    method: str
    path: str
    #: Lower-case names; wherever the API key appeared its value is ``REDACTED``.
    headers: dict[str, str]
    body: dict[str, Any]
    #: The headers that carried the API key (``authorization``, ``x-api-key``).
    key_headers: tuple[str, ...]
    #: The API key appeared in the path or the body (it never should).
    key_elsewhere: bool

    @property
    def stream(self) -> bool:
        return self.body.get("stream") is True


class _Server(ThreadingHTTPServer):
    # Handler threads are joined on close, so a test ends with no thread or socket left.
    daemon_threads = False
    standin: AnthropicStandIn


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive and chunked streams, as the real API
    server: _Server
    #: A safety net: a connection idle this long is dropped.
    timeout = 30

    def setup(self) -> None:
        super().setup()
        # Events go out as small writes: without this, Nagle holds each one for an ACK.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.server.standin._track(self.connection, add=True)

    def finish(self) -> None:
        self.server.standin._track(self.connection, add=False)
        try:
            super().finish()
        except OSError:
            pass  # the client went away first

    def do_POST(self) -> None:
        try:
            self.server.standin._handle(self)
        except (BrokenPipeError, ConnectionResetError, TimeoutError):
            self.close_connection = True  # the client hung up (e.g. an idle timeout)

    def do_GET(self) -> None:
        self.server.standin._send_error(self, 404, "not_found_error", f"Not found: {self.path}")

    def log_message(self, format: str, *args: Any) -> None:
        pass  # quiet: tests read ``requests`` instead


class AnthropicStandIn:
    """A scripted Messages API on 127.0.0.1:<free port>; a context manager."""

    def __init__(
        self,
        *,
        api_key: str = "sk-ant-standin-0000",
        oracle: Callable[[dict[str, Any]], Reply] | None = None,
        port: int = 0,
        aliases: dict[str, str] | None = None,
    ) -> None:
        """``oracle``: answers a valid request when no scripted reply is left (a test's
        model of the provider, e.g. one serving a replay directory). ``port``: where to
        listen (default: a free port), e.g. an address a run was given before the
        provider came up. ``aliases``: as the API does, a request for an alias is answered
        by (and its reply names) the dated model the alias stands for."""
        self.api_key = api_key
        self.aliases = dict(aliases or {})
        self.oracle = oracle
        self._lock = threading.Lock()
        self._replies: deque[Reply] = deque()
        self._requests: list[RecordedRequest] = []
        self._connections: set[socket.socket] = set()
        self._stop = threading.Event()
        self._ids = itertools.count(1)
        self._server = _Server(("127.0.0.1", port), _Handler)
        self._server.standin = self
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.05},
            name="anthropic-standin",
        )
        self._closed = False
        self._thread.start()

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def script(self, *replies: Reply) -> None:
        """Queue replies, used one per accepted request, in order."""
        with self._lock:
            self._replies.extend(replies)

    @property
    def requests(self) -> list[RecordedRequest]:
        with self._lock:
            return list(self._requests)

    @property
    def pending(self) -> int:
        """Scripted replies not used yet."""
        with self._lock:
            return len(self._replies)

    def close(self) -> None:
        """Stop serving, wake any stalled reply, drop open connections, join every thread."""
        if self._closed:
            return
        self._closed = True
        self._stop.set()
        self._server.shutdown()
        with self._lock:
            connections = list(self._connections)
        for conn in connections:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self._server.server_close()
        self._thread.join()

    def __enter__(self) -> AnthropicStandIn:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- inside the handler threads -----------------------------------------------------

    def _track(self, conn: socket.socket, *, add: bool) -> None:
        with self._lock:
            if add:
                self._connections.add(conn)
            else:
                self._connections.discard(conn)

    def _handle(self, handler: _Handler) -> None:
        length = int(handler.headers.get("content-length") or 0)
        raw = handler.rfile.read(length) if length else b""
        text = raw.decode("utf-8", errors="replace")
        try:
            body = json.loads(text) if text else {}
        except ValueError:
            body = None
        headers = {name.lower(): value for name, value in handler.headers.items()}
        key_headers = tuple(sorted(n for n, v in headers.items() if self.api_key in v))
        with self._lock:
            self._requests.append(
                RecordedRequest(
                    method=handler.command,
                    path=handler.path,
                    headers={
                        n: v.replace(self.api_key, REDACTED) if self.api_key else v
                        for n, v in headers.items()
                    },
                    body=body if isinstance(body, dict) else {},
                    key_headers=key_headers,
                    key_elsewhere=bool(self.api_key)
                    and (self.api_key in text or self.api_key in handler.path),
                )
            )
        if handler.path.split("?")[0] != "/v1/messages":
            self._send_error(handler, 404, "not_found_error", f"Not found: {handler.path}")
            return
        if not self._authenticated(headers):
            self._send_error(handler, 401, "authentication_error", "invalid x-api-key")
            return
        if not isinstance(body, dict):
            self._send_error(handler, 400, "invalid_request_error", "the body is not JSON")
            return
        problem = _request_problem(headers, body)
        if problem is not None:
            self._send_error(handler, 400, "invalid_request_error", problem)
            return
        with self._lock:
            reply = self._replies.popleft() if self._replies else None
        if reply is None and self.oracle is not None:
            reply = self.oracle(body)
        if reply is None:
            self._send_error(handler, 500, "api_error", "stand-in: no scripted reply left")
        elif isinstance(reply, ErrorReply) and reply.in_stream and body.get("stream") is True:
            self._stream_error(handler, body, reply)
        elif isinstance(reply, ErrorReply):
            self._send_error(
                handler, reply.status, reply.error_type, reply.message, reply.retry_after
            )
        elif isinstance(reply, Stall):
            self._stall(handler, body, reply)
        elif body.get("stream") is True:
            self._send_stream(handler, body, reply)
        else:
            self._send_json(handler, 200, self._message(body, reply))

    def _authenticated(self, headers: dict[str, str]) -> bool:
        if not self.api_key:
            return True
        return headers.get("x-api-key") == self.api_key or headers.get("authorization") == (
            f"Bearer {self.api_key}"
        )

    def _send_json(
        self,
        handler: _Handler,
        status: int,
        payload: dict[str, Any],
        extra_headers: dict[str, str] | None = None,
    ) -> None:
        data = json.dumps(payload).encode()
        handler.send_response(status)
        handler.send_header("content-type", "application/json")
        handler.send_header("content-length", str(len(data)))
        handler.send_header("request-id", f"req_standin_{next(self._ids)}")
        for name, value in (extra_headers or {}).items():
            handler.send_header(name, value)
        handler.end_headers()
        handler.wfile.write(data)

    def _send_error(
        self,
        handler: _Handler,
        status: int,
        error_type: str,
        message: str,
        retry_after: str | None = None,
    ) -> None:
        self._send_json(
            handler,
            status,
            {
                "type": "error",
                "error": {"type": error_type, "message": message},
                "request_id": f"req_standin_{next(self._ids)}",
            },
            {"retry-after": retry_after} if retry_after is not None else None,
        )

    def _message(self, body: dict[str, Any], reply: Reply) -> dict[str, Any]:
        """The non-streaming reply: one whole ``message`` object."""
        content: list[dict[str, Any]]
        if isinstance(reply, ToolAnswer):
            content = [self._tool_block(body, reply.data)]
            stop, usage = "tool_use", _usage(reply)
        elif isinstance(reply, MalformedToolInput):
            content = [self._tool_block(body, {})]
            stop, usage = reply.stop_reason, _usage(reply)
        else:
            assert isinstance(reply, TextAnswer)
            content = [{"type": "text", "text": reply.text}]
            stop, usage = "end_turn", _usage(reply)
        return {
            **self._message_head(body),
            "content": content,
            "stop_reason": stop,
            "usage": usage,
        }

    def _message_head(self, body: dict[str, Any]) -> dict[str, Any]:
        return {
            "id": f"msg_standin_{next(self._ids)}",
            "type": "message",
            "role": "assistant",
            "model": self.aliases.get(str(body.get("model", "")), body.get("model", "")),
            "stop_sequence": None,
        }

    def _tool_block(self, body: dict[str, Any], tool_input: Any) -> dict[str, Any]:
        return {
            "type": "tool_use",
            "id": f"toolu_standin_{next(self._ids)}",
            "name": _forced_tool(body),
            "input": tool_input,
        }

    def _start_stream(self, handler: _Handler) -> None:
        handler.send_response(200)
        handler.send_header("content-type", "text/event-stream; charset=utf-8")
        handler.send_header("cache-control", "no-cache")
        handler.send_header("transfer-encoding", "chunked")
        handler.send_header("request-id", f"req_standin_{next(self._ids)}")
        handler.end_headers()

    def _send_stream(self, handler: _Handler, body: dict[str, Any], reply: Reply) -> None:
        """The streaming reply, event by event, as the API sends it."""
        self._start_stream(handler)
        usage = _usage(reply)
        start_usage = {**usage, "output_tokens": 1}
        _event(
            handler,
            "message_start",
            {
                "type": "message_start",
                "message": {
                    **self._message_head(body),
                    "content": [],
                    "stop_reason": None,
                    "usage": start_usage,
                },
            },
        )
        if isinstance(reply, TextAnswer):
            block: dict[str, Any] = {"type": "text", "text": ""}
            deltas = [{"type": "text_delta", "text": part} for part in _chunks(reply.text, 24)]
            stop = "end_turn"
        else:
            block = {**self._tool_block(body, {}), "input": {}}
            if isinstance(reply, ToolAnswer):
                pieces = _chunks(json.dumps(reply.data), reply.chunk_chars)
                stop = "tool_use"
            else:
                assert isinstance(reply, MalformedToolInput)
                pieces = _chunks(reply.partial_json, 24)
                stop = reply.stop_reason
            # The API opens a tool input with an empty piece.
            deltas = [{"type": "input_json_delta", "partial_json": p} for p in ["", *pieces]]
        _event(
            handler,
            "content_block_start",
            {"type": "content_block_start", "index": 0, "content_block": block},
        )
        _event(handler, "ping", {"type": "ping"})
        for delta in deltas:
            _event(
                handler,
                "content_block_delta",
                {"type": "content_block_delta", "index": 0, "delta": delta},
            )
        _event(handler, "content_block_stop", {"type": "content_block_stop", "index": 0})
        _event(
            handler,
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop, "stop_sequence": None},
                "usage": {k: v for k, v in usage.items() if k != "cache_creation"},
            },
        )
        _event(handler, "message_stop", {"type": "message_stop"})
        handler.wfile.write(b"0\r\n\r\n")

    def _stall(self, handler: _Handler, body: dict[str, Any], reply: Stall) -> None:
        if body.get("stream") is True:
            self._start_stream(handler)
            self._message_start(handler, body, reply.input_tokens)
        self._stop.wait(reply.seconds)
        handler.close_connection = True  # and never finish the reply

    def _stream_error(self, handler: _Handler, body: dict[str, Any], reply: ErrorReply) -> None:
        self._start_stream(handler)
        self._message_start(handler, body, 120)
        _event(
            handler,
            "error",
            {"type": "error", "error": {"type": reply.error_type, "message": reply.message}},
        )
        handler.wfile.write(b"0\r\n\r\n")

    def _message_start(self, handler: _Handler, body: dict[str, Any], input_tokens: int) -> None:
        usage = {
            "input_tokens": input_tokens,
            "output_tokens": 1,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
        }
        message = {**self._message_head(body), "content": [], "stop_reason": None, "usage": usage}
        _event(handler, "message_start", {"type": "message_start", "message": message})


def _event(handler: _Handler, name: str, payload: dict[str, Any]) -> None:
    """One server-sent event, as one HTTP chunk."""
    data = f"event: {name}\ndata: {json.dumps(payload)}\n\n".encode()
    handler.wfile.write(f"{len(data):X}\r\n".encode() + data + b"\r\n")
    handler.wfile.flush()


def _chunks(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), max(1, size))] or [""]


def _usage(reply: Reply) -> dict[str, Any]:
    cache_write = getattr(reply, "cache_write_tokens", 0)
    return {
        "input_tokens": getattr(reply, "input_tokens", 0),
        "output_tokens": getattr(reply, "output_tokens", 0),
        "cache_creation_input_tokens": cache_write,
        "cache_read_input_tokens": getattr(reply, "cache_read_tokens", 0),
        "cache_creation": {
            "ephemeral_5m_input_tokens": cache_write,
            "ephemeral_1h_input_tokens": 0,
        },
        "service_tier": "standard",
    }


def _forced_tool(body: dict[str, Any]) -> str:
    choice = body.get("tool_choice")
    if isinstance(choice, dict) and choice.get("type") == "tool":
        return str(choice.get("name"))
    tools = body.get("tools") or [{}]
    return str(tools[0].get("name", "tool"))


def _request_problem(headers: dict[str, str], body: dict[str, Any]) -> str | None:
    """What the real API would reject in this request with a 400, if anything."""
    if "anthropic-version" not in headers:
        return "anthropic-version: header is required"
    for name in ("model", "max_tokens", "messages"):
        if name not in body:
            return f"{name}: Field required"
    messages = body["messages"]
    if not isinstance(messages, list) or not messages:
        return "messages: at least one message is required"
    if messages[0].get("role") != "user":
        return 'messages: the first message must use the "user" role'
    for index, message in enumerate(messages):
        if message.get("role") != "assistant":
            continue
        content = message.get("content")
        ids = {
            block.get("id")
            for block in (content if isinstance(content, list) else [])
            if block.get("type") == "tool_use"
        }
        if not ids:
            continue
        following = messages[index + 1] if index + 1 < len(messages) else {}
        reply = following.get("content")
        answered = {
            block.get("tool_use_id")
            for block in (reply if isinstance(reply, list) else [])
            if block.get("type") == "tool_result"
        }
        if ids - answered:
            return (
                f"messages.{index + 1}: `tool_use` ids were found without `tool_result` "
                f"blocks immediately after: {', '.join(sorted(ids - answered))}. Each "
                "`tool_use` block must have a corresponding `tool_result` block in the "
                "next message."
            )
    return None
