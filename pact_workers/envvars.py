"""Settings read from ``PACT_*`` environment variables, checked where they are read."""

from __future__ import annotations

from collections.abc import Mapping

from pact_workers.errors import InputError


def whole_number(
    environ: Mapping[str, str], name: str, default: int, *, what: str, unset: str
) -> int:
    """``name``'s value, a whole number of at least 1; ``default`` when it is unset or
    empty.

    Raises:
        InputError: naming the variable, ``what`` it gives and ``unset`` (what holds
            without it).
    """
    raw = environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value < 1:
        raise InputError(f"{name}={raw!r}: give {what}, a whole number of at least 1 ({unset})")
    return value
