"""Keep a fleet worker running: restart it when it exits without being told to."""

from __future__ import annotations

import signal
import subprocess
import time
from collections.abc import Callable


def supervise(
    argv: list[str],
    *,
    log: Callable[[str], None],
    max_backoff_s: float = 30.0,
    healthy_after_s: float = 60.0,
) -> int:
    """Run ``argv`` and restart it when it exits with an error, with capped backoff.

    A Celery worker can die of a broker hiccup (an unrecoverable error in the
    transport while Redis restarts), and then it may even exit with status 0; the
    fleet must not shrink because of it. So the child is restarted whenever it
    exits without having been told to: SIGTERM and SIGINT are passed on to it
    and end the supervision.
    """
    stopping = False
    child: subprocess.Popen[bytes] | None = None

    def forward(signum: int, _frame: object) -> None:
        nonlocal stopping
        stopping = True
        if child is not None and child.poll() is None:
            child.send_signal(signum)

    previous = {sig: signal.signal(sig, forward) for sig in (signal.SIGTERM, signal.SIGINT)}
    backoff_s = 1.0
    try:
        while True:
            started = time.monotonic()
            child = subprocess.Popen(argv)
            code = child.wait()
            if stopping:
                return code
            if time.monotonic() - started > healthy_after_s:
                backoff_s = 1.0
            log(f"worker exited with status {code}; restarting in {backoff_s:.0f} s")
            deadline = time.monotonic() + backoff_s
            while time.monotonic() < deadline and not stopping:
                time.sleep(0.1)
            if stopping:
                return code
            backoff_s = min(backoff_s * 2, max_backoff_s)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
