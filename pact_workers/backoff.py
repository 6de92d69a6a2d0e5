"""How long to wait before trying again: one backoff for the scheduler's retries and the
agent backends' own, and the ``retry-after`` an HTTP server may ask for."""

from __future__ import annotations

import email.utils
import random
import time
from collections.abc import Mapping


def backoff_s(failures: int, *, base_s: float, cap_s: float, rng: random.Random) -> float:
    """Exponential backoff with equal jitter: half fixed, half random, capped."""
    ceiling = min(cap_s, base_s * float(2 ** max(failures - 1, 0)))
    return ceiling / 2 + rng.random() * ceiling / 2


def retry_after_s(headers: Mapping[str, str]) -> float | None:
    """The wait a response asks for (``retry-after-ms``, ``retry-after`` in seconds or as
    an HTTP date), never negative; None when it asks for none or says it unreadably."""
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is None:
            continue
        try:
            return max(0.0, float(value) * scale)
        except ValueError:
            pass
        when = email.utils.parsedate_tz(value) if name == "retry-after" else None
        if when is not None:
            return max(0.0, email.utils.mktime_tz(when) - time.time())
    return None
