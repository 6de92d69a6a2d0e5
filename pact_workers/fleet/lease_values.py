"""What an attempt's lease (``pact:lease:<run>:<comp>:<phase>:<n>``) may hold, and what
its reader makes of a value that is none of them.

Anyone who can write to the fleet's Redis can leave any value there, or a key of
another type. Neither is a lease: the scheduler reads it as no lease (the attempt is
lost and dispatched again), never as an attempt that is neither alive nor lost until
its role's timeout, nor as an error of every lease check of the run's owner.
"""

from __future__ import annotations

import logging

import redis
from redis.exceptions import ResponseError

from pact_workers.fleet.wire import discard, is_wrong_type

__all__ = ["QUEUED", "RUNNING", "SENT", "lease_state"]

log = logging.getLogger(__name__)

#: The lease value of an attempt recorded as dispatched, its message maybe not sent yet.
QUEUED = b"queued"
#: The lease value of an attempt whose task message is on its queue (no worker yet).
SENT = b"sent"
#: Prefix of the lease value of a running attempt (``running:<worker id>``).
RUNNING = b"running:"


def lease_state(client: redis.Redis, key: str, reply: object) -> bytes | None:
    """The lease in ``reply`` (Redis's answer to GET ``key``), or None when there is
    none: absent, a key of another type (deleted, said so), or a value that is no
    lease (said so; left to expire, or to be overwritten by a worker that holds it)."""
    if isinstance(reply, ResponseError):
        if not is_wrong_type(reply):
            raise reply
        discard(client, key, expected="string", what="an attempt's lease")
        return None
    if reply is None:
        return None
    if isinstance(reply, bytes) and (reply in (QUEUED, SENT) or reply.startswith(RUNNING)):
        return reply
    log.warning(
        "%s holds %r, not a lease (queued, sent or running:<worker>); taken as none",
        key,
        reply[:40] if isinstance(reply, bytes | str) else reply,
    )
    return None
