"""Settings read from ``PACT_*`` environment variables, checked where they are read."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import TypeVar

from pact_workers.errors import InputError

N = TypeVar("N", int, float)


def whole_number(
    environ: Mapping[str, str], name: str, default: int, *, what: str, unset: str
) -> int:
    """``name``'s value, a whole number of at least 1; ``default`` when it is unset or
    empty.

    Raises:
        InputError: naming the variable, ``what`` it gives and ``unset`` (what holds
            without it).
    """
    return _read(
        environ,
        name,
        default,
        int,
        lambda v: v >= 1,
        f"{what}, a whole number of at least 1",
        unset,
    )


def positive_seconds(
    environ: Mapping[str, str], name: str, default: float, *, what: str, unset: str
) -> float:
    """``name``'s value, a finite number of seconds greater than 0; ``default`` when it
    is unset or empty.

    Raises:
        InputError: naming the variable, ``what`` it gives and ``unset`` (what holds
            without it).
    """
    return _read(
        environ,
        name,
        default,
        float,
        lambda v: math.isfinite(v) and v > 0,
        f"{what}, a number of seconds greater than 0",
        unset,
    )


def _read(
    environ: Mapping[str, str],
    name: str,
    default: N,
    convert: Callable[[str], N],
    valid: Callable[[N], bool],
    wanted: str,
    unset: str,
) -> N:
    raw = environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = convert(raw)
    except ValueError:
        value = None
    if value is None or not valid(value):
        raise InputError(f"{name}={raw!r}: give {wanted} ({unset})")
    return value
