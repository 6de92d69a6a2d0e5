"""A local stand-in for an OpenAI-compatible Chat Completions server, for tests only.

It is NOT OpenAI: a threaded stdlib HTTP server on 127.0.0.1 that speaks the same wire
format (``POST /v1/chat/completions``, a JSON answer or, with ``stream: true``,
server-sent events ending with ``data: [DONE]`` and a usage chunk when
``stream_options.include_usage`` is set; errors as ``{"error": {...}}`` bodies), so
that the real ``openai`` SDK can be pointed at it.

Two modes:

- scripted: a test queues :class:`Reply` objects (an answer with token counts,
  malformed arguments, an HTTP error, a stream that stalls); each request takes the next.
- oracle: every request is answered from a replay directory (the bundled example's
  ``replay/``): the role is read from the system prompt, the component from the first
  line of the user message, and the answer is exactly what that role must produce, with
  token counts computed from the sizes of the request and the answer (``len // 4``).

Every request is recorded without its key; every answer's token counts are recorded
(:attr:`OpenAIStandIn.served`) so that a test can sum what the server billed.
"""

from __future__ import annotations

import json
import re
import sys
import threading
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import yaml

#: The first words of each role's system prompt (pact_workers/agents/prompts/<role>.v1.md).
ROLE_BY_PROMPT = {
    "You are the contract author": "contract_author",
    "You are the test author": "test_author",
    "You are the code author": "code_author",
    "You are the integrator": "integrator",
    "You are the trace analyst": "trace_analyst",
    "You are the auditor": "auditor",
}
#: The section that asks for a teachback before the work (pact_workers.agents.roles).
TEACHBACK_HEADING = "## First, a teachback"
#: The heading of a retry's feedback section (pact_workers.agents.roles.feedback_section).
RETRY_HEADING = "## Your previous attempt failed verification"
#: A failing test as the feedback section lists it: ``- <test id>: <first line>``.
_FAILING = re.compile(r"^- (\S+::\S+): ", re.MULTILINE)

#: How many pieces a streamed answer's arguments are cut into.
STREAM_PIECES = 3


@dataclass(frozen=True)
class Reply:
    """One scripted response. Build with :meth:`answer` or :meth:`failure`."""

    arguments: str | None = None  # the function call's arguments text
    content: str | None = None  # plain assistant text instead of a function call
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    send_usage: bool = True  # False: a server that never reports usage
    status: int = 200
    error: dict[str, Any] | None = None  # the error object of an HTTP error
    headers: dict[str, str] = field(default_factory=dict)
    stall_s: float = 0.0  # streaming: after the first chunk, send nothing for this long
    finish_reason: str = "tool_calls"

    @classmethod
    def answer(
        cls,
        data: Any,
        *,
        prompt_tokens: int = 100,
        completion_tokens: int = 50,
        cached_tokens: int = 0,
        **fields: Any,
    ) -> Reply:
        """A function call whose arguments are ``data`` as JSON (or ``data`` if a str)."""
        arguments = data if isinstance(data, str) else json.dumps(data)
        return cls(
            arguments=arguments,
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            cached_tokens=cached_tokens,
            **fields,
        )

    @classmethod
    def failure(
        cls,
        status: int,
        message: str,
        *,
        code: str | None = None,
        type_: str = "invalid_request_error",
        headers: dict[str, str] | None = None,
    ) -> Reply:
        """An HTTP error with OpenAI's error body."""
        error = {"message": message, "type": type_, "param": None, "code": code}
        return cls(status=status, error=error, headers=headers or {})


@dataclass(frozen=True)
class RecordedRequest:
    """A request as the stand-in received it, minus the key."""

    path: str
    body: dict[str, Any]
    had_key: bool  # an ``Authorization: Bearer ...`` header was sent


@dataclass(frozen=True)
class Served:
    """The token counts of one answer the stand-in gave."""

    component_id: str
    role: str
    prompt_tokens: int
    cached_tokens: int
    completion_tokens: int
    stream: bool


class _Server(ThreadingHTTPServer):
    # Handler threads are joined on close (every response closes its connection, and a
    # stalled one wakes up when the stand-in stops), so no thread outlives a test.
    daemon_threads = False
    block_on_close = True

    def __init__(self, standin: OpenAIStandIn, port: int = 0) -> None:
        super().__init__(("127.0.0.1", port), _Handler)
        self.standin = standin

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that went away (the backend abandoning a stalled stream) is expected.
        exc = sys.exc_info()[1]
        if isinstance(exc, ConnectionError | TimeoutError):
            return
        self.standin.errors.append(repr(exc))
        super().handle_error(request, client_address)


class OpenAIStandIn:
    """The stand-in server; use as a context manager (it starts and stops the server).

    Args:
        oracle_dir: Answer every request from this replay directory (oracle mode).
        api_key: Require this key (``Authorization: Bearer <key>``); a wrong one gets a
            401 whose message echoes what was sent, as a careless server might.
        first_attempts: In oracle mode, answer an implementer's first attempt (a prompt
            without a retry section) with the files ``replay.yaml`` scripts for attempt 1,
            so that it fails as in the replay run; a trace analyst gets a diagnosis that
            names the failing tests its prompt lists.
        port: Where to listen (default: a free port), e.g. an address a run was given
            before the server came up.
    """

    def __init__(
        self,
        *,
        oracle_dir: Path | None = None,
        api_key: str | None = None,
        first_attempts: bool = False,
        port: int = 0,
    ) -> None:
        self.oracle_dir = oracle_dir
        self.first_attempts = first_attempts
        self.api_key = api_key
        self.requests: list[RecordedRequest] = []
        self.served: list[Served] = []
        self.errors: list[str] = []
        self._replies: deque[Reply] = deque()
        self._lock = threading.Lock()
        self._seen_systems: set[str] = set()
        self.stopping = threading.Event()
        self._server = _Server(self, port)
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    def script(self, *replies: Reply) -> None:
        """Queue replies; each request takes the next one."""
        with self._lock:
            self._replies.extend(replies)

    def start(self) -> OpenAIStandIn:
        self._thread.start()
        return self

    def close(self) -> None:
        self.stopping.set()
        if self._thread.is_alive():
            self._server.shutdown()
            self._thread.join(timeout=10)
        self._server.server_close()  # joins the handler threads

    def __enter__(self) -> OpenAIStandIn:
        return self.start()

    def __exit__(self, *_exc: object) -> None:
        self.close()

    # -- answers ------------------------------------------------------------------------

    def next_reply(self, body: dict[str, Any]) -> tuple[Reply, str, str]:
        """The reply to ``body``, and the component and role it is for."""
        if self.oracle_dir is not None:
            return self._oracle(body)
        with self._lock:
            if self._replies:
                return self._replies.popleft(), "", ""
        return Reply.failure(400, "the stand-in has no scripted reply left"), "", ""

    def _oracle(self, body: dict[str, Any]) -> tuple[Reply, str, str]:
        assert self.oracle_dir is not None
        messages = body.get("messages", [])
        system = next((m["content"] for m in messages if m.get("role") == "system"), "")
        user = next((m["content"] for m in messages if m.get("role") == "user"), "")
        role = next((r for words, r in ROLE_BY_PROMPT.items() if system.startswith(words)), "")
        first_line = user.splitlines()[0] if user else ""
        if not role or not first_line.startswith("# Component "):
            return Reply.failure(400, "the oracle cannot tell the role or component"), "", ""
        cid = first_line.removeprefix("# Component ").strip()
        base = self.oracle_dir / cid
        answer: dict[str, Any]
        if TEACHBACK_HEADING in user:
            answer = teachback_answer(base, user)
        elif role == "auditor":
            answer = json.loads((base / "audit.json").read_text(encoding="utf-8"))
        elif role == "contract_author":
            answer = json.loads((base / "interface.json").read_text(encoding="utf-8"))
        elif role == "test_author":
            test_code = (base / "tests" / "contract_test.py").read_text(encoding="utf-8")
            answer = {"test_code": test_code, "test_cases": []}
        elif role == "trace_analyst":
            failing = sorted(set(_FAILING.findall(user)))
            answer = {
                "summary": f"{len(failing)} contract tests fail: {', '.join(failing)}",
                "root_cause": f"src/{cid}.py does not do what those tests check",
                "suggested_fix": f"make src/{cid}.py satisfy {', '.join(failing)}",
                "files": [f"src/{cid}.py"],
            }
        else:
            first = self.first_attempts and RETRY_HEADING not in user
            source = (self._first_attempt_dir(cid) if first else None) or base
            text = (source / "src" / f"{cid}.py").read_text(encoding="utf-8")
            answer = {"files": {f"{cid}.py": text}}
        arguments = json.dumps(answer)
        # Like a provider's prompt cache: a role's instructions are cached once seen.
        with self._lock:
            cached = len(system) // 4 if system in self._seen_systems else 0
            self._seen_systems.add(system)
        reply = Reply.answer(
            arguments,
            prompt_tokens=len(json.dumps(messages)) // 4,
            completion_tokens=len(arguments) // 4,
            cached_tokens=cached,
        )
        return reply, cid, role

    def _first_attempt_dir(self, cid: str) -> Path | None:
        """The directory ``replay.yaml`` serves for ``cid``'s first implementation."""
        assert self.oracle_dir is not None
        script = yaml.safe_load((self.oracle_dir / "replay.yaml").read_text(encoding="utf-8"))
        phases = (script.get("script") or {}).get(cid) or {}
        step = (phases.get("implement") or phases.get("integrate") or {}).get(1) or {}
        return self.oracle_dir / step["files"] if step.get("files") else None


def teachback_answer(base: Path, user: str) -> dict[str, Any]:
    """A teachback from a replay directory: the one ``attempts/teachback-1`` holds (it
    may omit something) until a rejection came back in the prompt, then the
    component's ``teachback.json``."""
    first = base / "attempts" / "teachback-1" / "teachback.json"
    source = first if first.is_file() and "teachback rejected" not in user else None
    doc: dict[str, Any] = json.loads(
        (source or base / "teachback.json").read_text(encoding="utf-8")
    )
    return doc


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server
    timeout = 30  # a client that connects and sends nothing does not hold a thread

    def log_message(self, format: str, *args: Any) -> None:
        pass  # quiet: tests assert on records, not on logs

    def do_POST(self) -> None:
        standin = self.server.standin
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length)
        auth = self.headers.get("Authorization", "")
        sent_key = auth.removeprefix("Bearer ").strip() if auth.startswith("Bearer ") else ""
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            body = {"unparseable": raw.decode("utf-8", "replace")}
        with standin._lock:
            standin.requests.append(
                RecordedRequest(path=self.path, body=body, had_key=bool(sent_key))
            )
        if self.path.rstrip("/") != "/v1/chat/completions":
            self._error(Reply.failure(404, f"no route {self.path}", code="unknown_url"))
            return
        if standin.api_key is not None and sent_key != standin.api_key:
            # Echoes the key it was sent, as a careless server might: the backend must
            # still never show it.
            self._error(
                Reply.failure(
                    401, f"Incorrect API key provided: {sent_key}", code="invalid_api_key"
                )
            )
            return
        reply, cid, role = standin.next_reply(body)
        if reply.status >= 400:
            self._error(reply)
            return
        stream = bool(body.get("stream"))
        if reply.send_usage:
            with standin._lock:
                standin.served.append(
                    Served(
                        component_id=cid,
                        role=role,
                        prompt_tokens=reply.prompt_tokens,
                        cached_tokens=reply.cached_tokens,
                        completion_tokens=reply.completion_tokens,
                        stream=stream,
                    )
                )
        function = _forced_function(body)
        model = str(body.get("model", ""))
        if stream:
            include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
            self._stream(reply, function, model, include_usage=include_usage)
        else:
            self._json(200, _completion(reply, function, model), reply.headers)

    # -- writing ------------------------------------------------------------------------

    def _error(self, reply: Reply) -> None:
        self._json(reply.status, {"error": reply.error}, reply.headers)

    def _json(self, status: int, doc: dict[str, Any], headers: dict[str, str]) -> None:
        data = json.dumps(doc).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Connection", "close")
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)
        self.close_connection = True

    def _stream(self, reply: Reply, function: str, model: str, *, include_usage: bool) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Connection", "close")
        for name, value in reply.headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.close_connection = True
        for index, chunk in enumerate(_chunks(reply, function, model)):
            self._event(json.dumps(chunk))
            if index == 0 and reply.stall_s:
                # Silence, then the rest (if the client is still there).
                self.server.standin.stopping.wait(reply.stall_s)
        if include_usage and reply.send_usage:
            self._event(json.dumps(_envelope(model, [], usage=_usage(reply))))
        self._event("[DONE]")
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def _event(self, data: str) -> None:
        payload = f"data: {data}\n\n".encode()
        self.wfile.write(f"{len(payload):X}\r\n".encode() + payload + b"\r\n")
        self.wfile.flush()


def _forced_function(body: dict[str, Any]) -> str:
    choice = body.get("tool_choice")
    if isinstance(choice, dict):
        return str(choice.get("function", {}).get("name", "answer"))
    tools = body.get("tools") or []
    return str(tools[0]["function"]["name"]) if tools else "answer"


def _usage(reply: Reply) -> dict[str, Any]:
    return {
        "prompt_tokens": reply.prompt_tokens,
        "completion_tokens": reply.completion_tokens,
        "total_tokens": reply.prompt_tokens + reply.completion_tokens,
        "prompt_tokens_details": {"cached_tokens": reply.cached_tokens},
    }


def _envelope(model: str, choices: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {
        "id": "chatcmpl-standin",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": model,
        "choices": choices,
        **extra,
    }


def _completion(reply: Reply, function: str, model: str) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": reply.content, "refusal": None}
    if reply.arguments is not None:
        message["tool_calls"] = [
            {
                "id": "call_standin",
                "type": "function",
                "function": {"name": function, "arguments": reply.arguments},
            }
        ]
    doc: dict[str, Any] = {
        "id": "chatcmpl-standin",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": reply.finish_reason if reply.arguments is not None else "stop",
                "logprobs": None,
            }
        ],
    }
    if reply.send_usage:
        doc["usage"] = _usage(reply)
    return doc


def _chunks(reply: Reply, function: str, model: str) -> Iterator[dict[str, Any]]:
    """The answer as Chat Completions chunks: the role and call header, pieces, the end."""

    def choice(delta: dict[str, Any], finish: str | None = None) -> list[dict[str, Any]]:
        return [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}]

    if reply.arguments is None:
        yield _envelope(model, choice({"role": "assistant", "content": ""}))
        text = reply.content or ""
        for piece in _pieces(text):
            yield _envelope(model, choice({"content": piece}))
        yield _envelope(model, choice({}, "stop"))
        return
    header = {
        "index": 0,
        "id": "call_standin",
        "type": "function",
        "function": {"name": function, "arguments": ""},
    }
    yield _envelope(model, choice({"role": "assistant", "content": None, "tool_calls": [header]}))
    for piece in _pieces(reply.arguments):
        yield _envelope(
            model, choice({"tool_calls": [{"index": 0, "function": {"arguments": piece}}]})
        )
    yield _envelope(model, choice({}, reply.finish_reason))


def _pieces(text: str) -> list[str]:
    size = max(1, -(-len(text) // STREAM_PIECES))
    return [text[i : i + size] for i in range(0, len(text), size)]
