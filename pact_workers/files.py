"""Durable file writes: a file is either entirely there or not at all."""

from __future__ import annotations

import contextlib
import ctypes
import itertools
import os
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

from pact_workers.errors import InputError


def given_path(text: str, field: str = "") -> Path:
    """A path a user or client gave as text (``field`` names where). Refused when empty:
    ``Path("")`` is the working directory, so ``--project "$DIR"`` with ``DIR`` unset
    would write a run where the user stands; and when it holds a NUL byte, which no
    path can.

    Raises:
        InputError: saying which of the two.
    """
    where = f"{field}: " if field else ""
    if not text:
        raise InputError(
            f"{where}an empty path, which would mean the working directory; give a file or "
            "directory (is a variable unset?)"
        )
    if "\x00" in text:
        raise InputError(f"{where}{text!r} holds a NUL byte, which no path can; fix the path")
    return Path(text)


def atomic_write(path: Path | str, data: bytes | Sequence[bytes], *, fsync: bool = True) -> None:
    """Write ``data`` to ``path`` via a temporary file in the same directory, fsync, rename.

    ``fsync=False`` leaves durability to a later :func:`sync_filesystem` (or fsync) of
    the caller's: the file is still whole or absent, but may not survive a power loss
    until then. ``data`` may come in pieces, written one after the other. The
    temporary file is ``.<name>.<pid>.<n>`` (owner-only, as ``mkstemp`` makes it);
    missing parent directories are made.
    """
    fd, tmp = _create_temporary(path)
    try:
        try:
            # Straight to the descriptor: a buffered file object per write was half
            # the cost of writing a small file (a run writes several per work item).
            for piece in (data,) if isinstance(data, bytes) else data:
                _write_all(fd, piece)
            if fsync:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _write_all(fd: int, data: bytes) -> None:
    written = os.write(fd, data)
    if written == len(data):
        return
    rest = memoryview(data)[written:]
    while rest:
        rest = rest[os.write(fd, rest) :]


#: Numbers temporary files apart within this process (``next`` on it is atomic).
_serial = itertools.count()
_NEW_FILE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)


def _create_temporary(path: Path | str) -> tuple[int, str]:
    """A new, empty file beside ``path``: (descriptor, name). Cheaper than ``mkstemp``
    (no random name, no directory made unless one is missing)."""
    parent, name = os.path.split(os.fspath(path))
    for _ in range(100):
        tmp = os.path.join(parent, f".{name}.{os.getpid()}.{next(_serial)}")
        try:
            return os.open(tmp, _NEW_FILE, 0o600), tmp
        except FileNotFoundError:
            os.makedirs(parent, exist_ok=True)
        except FileExistsError:
            continue  # a leftover of an earlier process with the same pid
    raise FileExistsError(f"{path}: no free temporary name beside it")


def new_directory(parent: str, prefix: str) -> str:
    """A new, empty directory in ``parent`` named ``<prefix><pid>.<n>``, owner-only as
    ``mkdtemp`` makes it (cheaper: no random name); ``parent`` must exist."""
    for _ in range(100):
        path = os.path.join(parent, f"{prefix}{os.getpid()}.{next(_serial)}")
        try:
            os.mkdir(path, 0o700)
            return path
        except FileExistsError:
            continue  # a leftover of an earlier process with the same pid
    raise FileExistsError(f"{parent}: no free name for a {prefix!r} directory")


def probe_directory(directory: str | os.PathLike[str]) -> None:
    """Make a directory in ``directory`` and remove it: whether anything can be made
    there. Permission bits are not the whole answer: a virtual file system such as
    /proc says yes to root, then refuses every file.

    Raises:
        OSError: nothing can be made there.
    """
    os.rmdir(new_directory(os.fspath(directory), ".pact-probe-"))


def write_file(path: str, data: bytes) -> None:
    """Create or truncate ``path`` and write ``data`` (not atomic: for a file in a
    directory that is renamed into place once complete)."""
    fd = os.open(path, _WRITE, 0o666)
    try:
        _write_all(fd, data)
    finally:
        os.close(fd)


_WRITE = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_CLOEXEC", 0)


class DeferredSync:
    """Writes whose durability waits for one sync of their file system.

    Each writer that skips its fsyncs calls :meth:`wrote` after writing under a
    directory of its own; :meth:`sync` then syncs each file system written to, once
    however many writers wrote to it (a run's blobs and its promoted files share one)
    and only if something was written since. Thread-safe: a writer marks after its
    write completes, so whatever a sync's snapshot of the marks misses was either
    written before it (and is synced by it) or is marked for the next one.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        #: Per file system (st_dev): a directory on it that was written to.
        self._dirty: dict[int, str] = {}
        self._devices: dict[str, int] = {}

    def wrote(self, directory: str) -> None:
        device = self._devices.get(directory)
        if device is None:
            if len(self._devices) >= 1024:  # a long-lived process: many runs' roots
                self._devices.clear()
            device = self._devices[directory] = os.stat(directory).st_dev
        with self._lock:
            self._dirty.setdefault(device, directory)

    def pending(self) -> bool:
        return bool(self._dirty)

    def sync(self) -> None:
        with self._lock:
            dirty, self._dirty = self._dirty, {}
        for directory in dirty.values():
            sync_filesystem(Path(directory))


#: The process's deferred writes (the run loop syncs them before each commit).
deferred_sync = DeferredSync()


def sync_filesystem(path: Path) -> None:
    """Make everything written to the file system holding ``path`` durable.

    One ``syncfs`` (Linux) instead of an fsync per file; elsewhere ``sync``.
    """
    fd = os.open(path, os.O_RDONLY)
    try:
        if _syncfs is not None and _syncfs(fd) == 0:
            return
        os.sync()
    finally:
        os.close(fd)


def _load_syncfs() -> Callable[[int], int] | None:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        function: Callable[[int], int] = libc.syncfs
    except (OSError, AttributeError):
        return None
    return function


_syncfs = _load_syncfs()
