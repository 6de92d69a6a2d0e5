"""Keys of the wrong Redis type: what a reader does with one someone else left.

Anyone who can write to the fleet's Redis can leave a key of the wrong type where a
reader expects another (a list where a cancel request, a string, belongs). Every
command of the reader on it then fails with WRONGTYPE, every time: a loop that lets
the error through and tries again stalls for ever, and all it drives with it. So a
reader of a key that others write reads it through :func:`read_or_discard`: a key of
the wrong type is logged, named, and deleted (nothing in it is a value the reader can
use), and the reader carries on as if it had been absent.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TypeVar

import redis
from redis.exceptions import ResponseError

__all__ = ["discard", "ensure_group", "is_wrong_type", "key_type", "read_or_discard"]

log = logging.getLogger(__name__)

T = TypeVar("T")


def is_wrong_type(exc: BaseException) -> bool:
    """True for Redis's answer to a command on a key of another type (also within a
    pipeline, whose error names the command first)."""
    return isinstance(exc, ResponseError) and "WRONGTYPE" in str(exc)


def read_or_discard(
    client: redis.Redis, key: str, read: Callable[[], T], *, expected: str, what: str
) -> T | None:
    """``read()`` (commands on ``key``); None when ``key`` is not of the ``expected``
    Redis type, after logging that and deleting the key (``what`` it should hold)."""
    try:
        return read()
    except ResponseError as exc:
        if not is_wrong_type(exc):
            raise
    discard(client, key, expected=expected, what=what)
    return None


def key_type(client: redis.Redis, key: str) -> str:
    """The Redis type of ``key`` (``none`` when it is absent), as text."""
    found = client.type(key)
    return found.decode() if isinstance(found, bytes) else str(found)


def discard(client: redis.Redis, key: str, *, expected: str, what: str) -> bool:
    """Delete ``key`` if it is neither absent nor of the ``expected`` Redis type, saying
    so (``what`` it should hold); whether it was."""
    kind = key_type(client, key)
    if kind in (expected, "none"):
        return False
    log.error("%s is a Redis %s, not a %s (%s); deleted", key, kind, expected, what)
    client.delete(key)
    return True


def ensure_group(client: redis.Redis, stream: str, group: str, *, what: str) -> None:
    """Create ``stream`` and its consumer ``group`` (reading from the start) unless they
    exist; a key of another type by the stream's name (it holds none of ``what`` the
    stream carries) is deleted first."""
    discard(client, stream, expected="stream", what=what)
    try:
        client.xgroup_create(stream, group, id="0", mkstream=True)
    except ResponseError as exc:
        if "BUSYGROUP" not in str(exc):
            raise
