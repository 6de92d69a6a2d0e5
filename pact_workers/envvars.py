"""Settings read from ``PACT_*`` environment variables, checked where they are read."""

from __future__ import annotations

import math
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


def positive_seconds(
    environ: Mapping[str, str], name: str, default: float, *, what: str, unset: str
) -> float:
    """``name``'s value, a finite number of seconds greater than 0; ``default`` when it
    is unset or empty.

    Raises:
        InputError: naming the variable, ``what`` it gives and ``unset`` (what holds
            without it).
    """
    raw = environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value <= 0:
        raise InputError(
            f"{name}={raw!r}: give {what}, a number of seconds greater than 0 ({unset})"
        )
    return value
