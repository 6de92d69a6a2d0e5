"""Celery's task queues in Redis, as a worker finds them before it starts.

kombu keeps a queue's messages in lists: one per priority step, named after the queue
(the first step) or the queue, kombu's separator and the step. A key by such a name
that is no list holds no task, and kombu fails on it (WRONGTYPE) at every poll: the
worker dies, its supervisor starts it again, and it dies again, for ever, with
Celery's traceback as the only word. A worker checks its queues first and refuses to
start over such a key, naming it and what to do; its supervisor's next start finds it
gone once it is deleted. The key is Celery's: the worker leaves it as it is.
"""

from __future__ import annotations

import redis
from kombu.transport.redis import PRIORITY_STEPS, Channel

__all__ = ["queue_keys", "queues_not_lists"]


def queue_keys(queue: str) -> list[str]:
    """The Redis keys of Celery queue ``queue``: one list per priority step."""
    return [queue if step == 0 else f"{queue}{Channel.sep}{step}" for step in PRIORITY_STEPS]


def queues_not_lists(client: redis.Redis, queues: list[str]) -> list[tuple[str, str]]:
    """The keys of ``queues`` that exist and are no list, with their Redis type."""
    names = [key for queue in queues for key in queue_keys(queue)]
    pipe = client.pipeline(transaction=False)
    for name in names:
        pipe.type(name)
    kinds = [k.decode() if isinstance(k, bytes) else str(k) for k in pipe.execute()]
    return [(n, k) for n, k in zip(names, kinds, strict=True) if k not in ("list", "none")]
