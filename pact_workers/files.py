"""Durable file writes: a file is either entirely there or not at all."""

from __future__ import annotations

import ctypes
import os
import tempfile
from collections.abc import Callable
from pathlib import Path


def atomic_write(path: Path, data: bytes, *, fsync: bool = True) -> None:
    """Write ``data`` to ``path`` via a temporary file in the same directory, fsync, rename.

    ``fsync=False`` leaves durability to a later :func:`sync_filesystem` (or fsync) of
    the caller's: the file is still whole or absent, but may not survive a power loss
    until then.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            if fsync:
                os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


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
