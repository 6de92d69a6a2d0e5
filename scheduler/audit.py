"""The append-only audit log, ``.pact/audit.jsonl``: one typed event per line.

An event counts only once it is on disk: :meth:`AuditLog.append` writes the
line, flushes and fsyncs before it returns, and the caller acts afterwards. A
line torn by a crash mid-write was never acknowledged, so the writer trims it
when it opens the log; readers skip and report unreadable lines.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Callable, Collection, Iterator
from pathlib import Path
from typing import IO, TypeVar, cast

from pydantic import ValidationError

from pact_workers.errors import RunDirError
from scheduler.events import Event, parse_event

E = TypeVar("E", bound=Event)


def _why(exc: ValueError) -> str:
    """Why a line is no event, in a few words: a validation error's first problem and
    where in the event (its own first line names only the union of event types)."""
    if isinstance(exc, ValidationError) and exc.errors():
        first = exc.errors()[0]
        # The union's tag (the event type) leads the location; the field follows it.
        field = ".".join(str(p) for p in first["loc"][1:])
        return f"{field}: {first['msg']}" if field else str(first["msg"])
    return str(exc).splitlines()[0]


def read_events(
    path: Path, *, offset: int = 0, types: Collection[str] | None = None
) -> tuple[list[Event], list[str]]:
    """All readable events in order (from byte ``offset`` on), and a warning for every
    line that is not one. ``types``: only events of these types (their ``type``
    field), and only the lines that could hold one are parsed: a reader of a few kinds
    skips the cost of parsing every line of a large log."""
    warnings: list[str] = []
    return list(_of_types(path, warnings, offset, types)), warnings


def _of_types(
    path: Path, warnings: list[str], offset: int, types: Collection[str] | None
) -> Iterator[Event]:
    if types is None:
        return scan_events(path, warnings, offset=offset)
    wanted = frozenset(types)
    needles = [b'"type":"' + t.encode() + b'"' for t in wanted]
    found = scan_events(
        path, warnings, offset=offset, keep=lambda line: any(n in line for n in needles)
    )
    return (e for e in found if e.type in wanted)


def scan_events(
    path: Path,
    warnings: list[str],
    *,
    offset: int = 0,
    keep: Callable[[bytes], bool] | None = None,
) -> Iterator[Event]:
    """The readable events of ``path`` from byte ``offset`` on, one line at a time (a
    fold of a large log need not hold it whole); each line that is not an event is
    added to ``warnings`` as the reading reaches it. ``keep``: only the lines it
    accepts are parsed.

    Raises:
        RunDirError: there is no log at ``path`` (on the first ``next``).
    """
    try:
        fh = path.open("rb")
    except FileNotFoundError:
        raise RunDirError(f"{path}: no audit log; is this a pact project directory?") from None
    with fh:
        fh.seek(offset)
        for number, line in enumerate(fh, start=1):
            if not line.strip() or (keep is not None and not keep(line)):
                continue
            try:
                event = parse_event(line)
            except (ValidationError, ValueError) as exc:
                # Only the last line can lack its newline: a crash while writing it.
                torn = not line.endswith(b"\n")
                what = "torn last line (crash while writing)" if torn else "unreadable event"
                where = (
                    f"{path}:{number}"
                    if not offset
                    else f"{path}, line {number} after byte {offset}"
                )
                warnings.append(f"{where}: {what}: {_why(exc)}")
                continue
            yield event


def iter_events(path: Path, *, types: Collection[str] | None = None) -> Iterator[Event]:
    """The readable events of ``path`` in order, one line at a time (a reader that
    needs one pass and not the whole log in memory); unreadable lines are skipped.
    ``types``: only those events, as :func:`read_events` reads them."""
    return _of_types(path, [], 0, types)


def line_before(path: Path, offset: int) -> bytes:
    """The bytes of the line of ``path`` that ends at ``offset`` (newline included)."""
    with path.open("rb") as fh:
        end = offset - 1 if offset > 0 else 0
        start = _last_newline_before(fh, end) + 1
        fh.seek(start)
        return fh.read(offset - start)


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
    """The single writer of one run's log; holds an exclusive lock while open.

    :meth:`append` makes one event durable at once. The run loop instead *stages* the
    events of one step and :meth:`commit` writes and fsyncs them together (group
    commit): nothing staged may be acted on before ``commit`` returns.

    ``fence`` is called before every write; it raises when this process may no longer
    write the run (another scheduler took it over), so a process that lost its claim
    cannot append a single line after the new owner started.
    """

    def __init__(self, path: Path, *, fence: Callable[[], None] | None = None) -> None:
        self.path = path
        self.fence = fence
        self._fh: IO[bytes] | None = None
        self._lock_fh: IO[bytes] | None = None
        self._staged: list[bytes] = []
        self.last_seq = 0
        #: Bytes of the log that are on disk (what a snapshot can say it covers).
        self.size = 0

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
        self.last_seq = last_seq_of(self.path)
        self._fh = self.path.open("ab")
        self.size = self._fh.tell()
        return self

    def _trim_torn_tail(self) -> None:
        if not self.path.exists():
            return
        with self.path.open("r+b") as fh:
            end = fh.seek(0, os.SEEK_END)
            if end == 0:
                return
            fh.seek(end - 1)
            if fh.read(1) == b"\n":
                return
            keep = _last_newline_before(fh, end) + 1
            fh.truncate(keep)
            fh.flush()
            os.fsync(fh.fileno())

    def stage(self, event: E) -> E:
        """Assign the next ``seq`` and buffer the event; durable only after :meth:`commit`."""
        if self._fh is None:
            raise RuntimeError("audit log is not open")
        stored = event.model_copy(update={"seq": self.last_seq + 1})
        self._staged.append(_line(stored))
        self.last_seq = stored.seq
        return cast(E, stored)

    def commit(self) -> None:
        """Write every staged event, flush and fsync once (nothing to do: no I/O)."""
        if not self._staged:
            return
        if self._fh is None:
            raise RuntimeError("audit log is not open")
        if self.fence is not None:
            self.fence()
        data = b"".join(self._staged)
        self._staged.clear()
        self._fh.write(data)
        self._fh.flush()
        os.fsync(self._fh.fileno())
        self.size += len(data)

    @property
    def staged(self) -> int:
        """Events staged and not yet committed."""
        return len(self._staged)

    def append(self, event: E) -> E:
        """Assign the next ``seq``, write, flush and fsync; return the stored event."""
        stored = self.stage(event)
        self.commit()
        return stored

    def close(self) -> None:
        """Release the log; events still staged are dropped (they were never acted on)."""
        self._staged.clear()
        if self._fh is not None:
            self._fh.close()
            self._fh = None
        if self._lock_fh is not None:
            fcntl.flock(self._lock_fh, fcntl.LOCK_UN)
            self._lock_fh.close()
            self._lock_fh = None

    @property
    def is_open(self) -> bool:
        """Whether this object holds the run's lock (between :meth:`open` and :meth:`close`)."""
        return self._lock_fh is not None

    def __enter__(self) -> AuditLog:
        return self.open()

    def __exit__(self, *exc: object) -> None:
        self.close()


def _line(event: Event) -> bytes:
    return event.model_dump_json().encode() + b"\n"


def create_log(path: Path, first: E, *, fence: Callable[[], None] | None = None) -> E:
    """Create the log at ``path`` holding ``first`` (``seq`` 1), or nothing: the line is
    written and fsynced to a temporary file that is then linked in as the log. A
    process killed meanwhile leaves no log, so a log that exists always holds its first
    event (an empty one would be a run nobody can open). ``fence`` is checked just
    before the link.

    Raises:
        FileExistsError: a log is there already (it is left as it is).
    """
    stored = first.model_copy(update={"seq": 1})
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.new-{os.getpid()}")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(_line(stored))
            fh.flush()
            os.fsync(fh.fileno())
        if fence is not None:
            fence()
        os.link(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)
    directory = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)
    return cast(E, stored)


def _last_newline_before(fh: IO[bytes], end: int, chunk: int = 1 << 16) -> int:
    """Offset of the last newline before ``end`` (-1: none), reading backwards."""
    pos = end
    while pos > 0:
        start = max(0, pos - chunk)
        fh.seek(start)
        block = fh.read(pos - start)
        found = block.rfind(b"\n")
        if found >= 0:
            return start + found
        pos = start
    return -1


def last_seq_of(path: Path) -> int:
    """The ``seq`` of the last complete event of a log, reading only its tail."""
    last = last_event_of(path)
    return 0 if last is None else last.seq


def last_event_of(path: Path) -> Event | None:
    """The last readable event of a log (what a pass of :func:`iter_events` ends on),
    reading only its tail; None when it has none."""
    if not path.exists():
        return None
    with path.open("rb") as fh:
        end = fh.seek(0, os.SEEK_END)
        while end > 0:
            newline = _last_newline_before(fh, end)
            start = newline + 1
            fh.seek(start)
            line = fh.read(end - start)
            if line.strip():
                try:
                    return parse_event(line)
                except (ValidationError, ValueError):
                    pass  # a torn or unreadable line: look at the one before
            end = max(newline, 0)
    return None
