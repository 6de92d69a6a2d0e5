"""The append-only audit log, ``.pact/audit.jsonl``: one typed event per line.

An event counts only once it is on disk: :meth:`AuditLog.append` writes the
line, flushes and fsyncs before it returns, and the caller acts afterwards. A
line torn by a crash mid-write was never acknowledged, so the writer trims it
when it opens the log; readers skip and report unreadable lines.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path
from typing import IO, TypeVar, cast

from pydantic import ValidationError

from pact_workers.errors import RunDirError
from scheduler.events import Event, parse_event

E = TypeVar("E", bound=Event)


def read_events(path: Path) -> tuple[list[Event], list[str]]:
    """All readable events in order, and a warning for every line that is not one."""
    events: list[Event] = []
    warnings: list[str] = []
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise RunDirError(f"{path}: no audit log; is this a pact project directory?") from None
    lines = raw.split(b"\n")
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            events.append(parse_event(line))
        except (ValidationError, ValueError) as exc:
            torn = number == len(lines) and not raw.endswith(b"\n")
            what = "torn last line (crash while writing)" if torn else "unreadable event"
            warnings.append(f"{path}:{number}: {what}: {str(exc).splitlines()[0]}")
    return events, warnings


def is_driven(path: Path) -> bool:
    """True while a pact process holds the lock of the run whose log is ``path``."""
    lock_path = path.with_suffix(".lock")
    try:
        with lock_path.open("rb") as fh:
            try:
                fcntl.flock(fh, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                return True
            fcntl.flock(fh, fcntl.LOCK_UN)
            return False
    except OSError:
        return False


class AuditLog:
    """The single writer of one run's log; holds an exclusive lock while open."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fh: IO[bytes] | None = None
        self._lock_fh: IO[bytes] | None = None
        self.last_seq = 0

    def open(self) -> AuditLog:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        lock_path = self.path.with_suffix(".lock")
        self._lock_fh = lock_path.open("ab")
        try:
            fcntl.flock(self._lock_fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self._lock_fh.close()
            self._lock_fh = None
            raise RunDirError(
                f"{self.path.parent.parent}: another pact process is driving this run"
            ) from None
        self._trim_torn_tail()
        if self.path.exists():
            events, _ = read_events(self.path)
            self.last_seq = max((e.seq for e in events), default=0)
        self._fh = self.path.open("ab")
        return self

    def _trim_torn_tail(self) -> None:
        if not self.path.exists():
            return
        raw = self.path.read_bytes()
        if raw and not raw.endswith(b"\n"):
            keep = raw.rfind(b"\n") + 1
            with self.path.open("r+b") as fh:
                fh.truncate(keep)
                fh.flush()
                os.fsync(fh.fileno())

    def append(self, event: E) -> E:
        """Assign the next ``seq``, write, flush and fsync; return the stored event."""
        if self._fh is None:
            raise RuntimeError("audit log is not open")
        stored = event.model_copy(update={"seq": self.last_seq + 1})
        self._fh.write(stored.model_dump_json().encode() + b"\n")
        self._fh.flush()
        os.fsync(self._fh.fileno())
        self.last_seq = stored.seq
        return cast(E, stored)

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None
        if self._lock_fh is not None:
            fcntl.flock(self._lock_fh, fcntl.LOCK_UN)
            self._lock_fh.close()
            self._lock_fh = None

    def __enter__(self) -> AuditLog:
        return self.open()

    def __exit__(self, *exc: object) -> None:
        self.close()
