#!/opt/pact/bin/python
"""Health checks of the fleet's containers (compose.yaml runs them; exit 0 is healthy).

    pact-healthcheck http URL   URL answers with a status below 500 (a 401 is an answer)
    pact-healthcheck worker     a Celery worker of THIS container answers a ping

The worker check broadcasts one ping on the broker (``PACT_BROKER_URL``) and looks for
a reply from a node named ``...@<this container's hostname>``, which is how
``pact worker`` names its Celery node; so it fails when the worker lost the broker,
not only when its process died.
"""

from __future__ import annotations

import os
import socket
import sys
import urllib.error
import urllib.request

USAGE = "usage: pact-healthcheck http URL | pact-healthcheck worker"
TIMEOUT_S = float(os.environ.get("PACT_HEALTHCHECK_TIMEOUT_S", "4"))


def check_http(url: str) -> str | None:
    """None when ``url`` answers, else why not."""
    try:
        with urllib.request.urlopen(url, timeout=TIMEOUT_S) as resp:
            status = int(resp.status)
    except urllib.error.HTTPError as exc:
        status = exc.code
    except OSError as exc:
        return f"{url}: {exc}"
    return None if status < 500 else f"{url}: HTTP {status}"


def check_worker() -> str | None:
    """None when a Celery node of this host answers a ping, else why not."""
    from pact_workers.app import app

    host = socket.gethostname()
    try:
        replies = app.control.ping(timeout=TIMEOUT_S)
    except Exception as exc:  # the broker is down or refuses us
        return f"ping over the broker failed: {exc}"
    nodes = [name for reply in replies for name in reply]
    if any(name.endswith(f"@{host}") for name in nodes):
        return None
    return f"no worker of host {host} answered a ping (answered: {', '.join(nodes) or 'none'})"


def main(argv: list[str]) -> int:
    if argv[:1] == ["http"] and len(argv) == 2:
        problem = check_http(argv[1])
    elif argv == ["worker"]:
        problem = check_worker()
    else:
        print(USAGE, file=sys.stderr)
        return 2
    if problem is None:
        return 0
    print(f"unhealthy: {problem}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
