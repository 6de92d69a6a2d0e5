"""The attach stream of a sandbox container: stdout and stderr demultiplexed, tails kept.

The engine multiplexes both streams on one socket, each frame prefixed by an 8-byte
header (stream kind, size). Only the tails are kept, so a chatty command costs memory
bounded by the request's output cap.
"""

from __future__ import annotations

import select
import socket
import struct
import threading
import time
from typing import Any

from pact_workers.sandbox.cancel import POLL_S

__all__ = ["STREAM_HEADER", "ClosingStream", "Tail", "pump"]

#: The engine's frame header: stream kind (1 stdout, 2 stderr), 3 bytes padding, size.
STREAM_HEADER = struct.Struct(">BxxxL")


class Tail:
    """Counts a stream and keeps its last ``limit + 1`` bytes (enough for ``cap_text``)."""

    def __init__(self, limit: int) -> None:
        self.keep = limit + 1
        self.total = 0
        self._buf = bytearray()

    def add(self, data: bytes) -> None:
        self.total += len(data)
        self._buf += data
        if len(self._buf) > 2 * self.keep:  # trim in batches, not on every write
            del self._buf[: -self.keep]

    def data(self) -> bytes:
        return bytes(self._buf[-self.keep :])


def pump(
    raw: socket.socket,
    out: Tail,
    err: Tail,
    *,
    deadline: float,
    cancel: threading.Event | None = None,
) -> bool:
    """Demultiplex the attach stream into ``out``/``err`` until EOF (True), ``deadline``
    or, when ``cancel`` is given, until it is set (False)."""
    pending = b""
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return False
        # With a cancel event the wait is sliced, so a cancel is seen within POLL_S.
        wait = remaining if cancel is None else min(remaining, POLL_S)
        ready, _, _ = select.select([raw], [], [], wait)
        if cancel is not None and cancel.is_set():
            return False
        if not ready:
            if cancel is None or time.monotonic() >= deadline:
                return False
            continue
        chunk = raw.recv(65536)
        if not chunk:
            return True
        pending += chunk
        while len(pending) >= STREAM_HEADER.size:
            kind, size = STREAM_HEADER.unpack_from(pending)
            end = STREAM_HEADER.size + size
            if len(pending) < end:
                break
            (err if kind == 2 else out).add(pending[STREAM_HEADER.size : end])
            pending = pending[end:]


class ClosingStream:
    """The raw socket under docker-py's attach response, closed (both layers) on exit."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream

    def __enter__(self) -> socket.socket:
        raw = getattr(self._stream, "_sock", self._stream)
        raw.settimeout(None)  # select() does the waiting
        return raw  # type: ignore[no-any-return]

    def __exit__(self, *exc: object) -> None:
        raw = getattr(self._stream, "_sock", None)
        self._stream.close()
        if raw is not None:
            raw.close()
