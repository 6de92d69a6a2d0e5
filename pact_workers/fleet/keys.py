"""Every Redis key pact-fleet uses, in one place (prefix ``pact:``).

Build keys only with the functions and constants here, so that this table stays the
whole truth about what pact-fleet keeps in Redis. Each entry: key pattern, type, TTL,
writer -> reader, then what it is for.

Ours (prefix ``pact:``)::

    pact:artifact:sha256:<hex>          string  no TTL          worker, scheduler -> both
        One blob of the artifact store (its bytes), content-addressed, written SET NX.
    pact:cache:sha256:<hex>             string  30 days, renewed by each hit
                                                                scheduler -> scheduler (any run)
        The action cache: one entry per action key (JSON: the verified result's bundle
        digest, what producing it cost, the run that recorded it), written only once
        the run's log holds the success; its files are ``pact:artifact:`` blobs. See
        ``scheduler.cache``.
    pact:results                        stream  no TTL, MAXLEN ~100 000
                                                                worker -> scheduler service
        Result messages (field ``result`` = ResultMessage JSON); consumer group
        ``scheduler``. Entries leave the group's pending list only when acknowledged.
    pact:results:<run>                  stream  no TTL, MAXLEN ~100 000
                                                                worker -> ``pact run``
        The same, for one ``pact run --executor celery`` (no scheduler service).
    pact:attempt:<run>:<comp>:<phase>   string  7 days          scheduler -> worker
        The attempt number the scheduler considers current: the fencing token a
        worker checks before it starts (a missing key counts as current).
    pact:lease:<run>:<comp>:<phase>:<n> string  queued: 24 h; running: ~10 s, renewed
                                                                scheduler, worker -> scheduler
        ``queued`` (dispatched, no worker yet) or ``running:<worker id>``. A running
        lease that expires means the worker is gone: the scheduler dispatches n + 1.
    pact:done:<run>:<comp>:<phase>:<n>  string  7 days          worker -> worker
        SET NX by the worker that publishes the result of attempt n: one result each.
    pact:worker:<id>                    string  3 heartbeats    worker -> workers, doctor, run
        A live worker process (Celery's hostname): JSON of roles, hostname, pid,
        concurrency, start and heartbeat time; written every 5 s
        (``PACT_WORKER_HEARTBEAT_S``), deleted when the worker stops cleanly.
    pact:runs                           hash    no TTL          submit -> scheduler service
        Run id -> JSON registry entry (project dir, status, submitted at).
    pact:submissions                    stream  no TTL, MAXLEN ~10 000
                                                                submit -> scheduler service
        Submitted trees waiting for the service; consumer group ``service``.
    pact:service:lock                   string  ~30 s, renewed  scheduler service -> itself
        The id of the one running scheduler service (SET NX with a TTL).

``<run>`` is a run id (hex), ``<comp>`` a component id (a Python identifier),
``<phase>`` a :class:`~pact_workers.models.work.Phase` value (``contract``, ``test``,
``implement``, ``integrate``) and ``<n>`` an attempt number (>= 1): none of them can
contain ``:``, so every key splits back into its parts. The artifact digest and the
action key are the parts with a ``:`` in them (``sha256:<hex>``); each is always the
last part.

Celery's, on the broker database (not ours: never edit them by hand)::

    pact.<role>                         list    a task queue per role (pact.code_author...);
                                                priority queues add a \\x06\\x16<n> suffix
    unacked                             hash    delivery tag -> message a worker has taken
                                                but not acknowledged (acks_late); the
                                                scheduler reads the task ids (one per
                                                attempt: <run>.<comp>.<phase>.<n>) to find
                                                messages taken but never started
    unacked_index                       zset    delivery tag -> time taken; restored to its
                                                queue after the visibility timeout
    unacked_mutex                       string  lock held while restoring unacked messages
    _kombu.binding.<exchange>           set     exchange -> queue routing table
    _kombu.fanout.*, *.pidbox           pubsub  remote control (celery inspect, Flower)
    celery-task-meta-<task id>          string  task results, only if a Redis result backend
                                                is configured (pact-fleet returns results
                                                through pact:results instead)

A Redis that holds these keys must never evict them: run it with
``maxmemory-policy noeviction`` and with persistence (``appendonly yes``).
"""

from __future__ import annotations

PREFIX = "pact:"

#: Stream of result messages read by the scheduler service.
RESULTS_STREAM = "pact:results"
#: Consumer group of the scheduler on a results stream.
RESULTS_GROUP = "scheduler"
#: Approximate cap on the length of a results stream (XADD MAXLEN ~).
RESULTS_MAXLEN = 100_000

#: Hash: run id -> JSON registry entry.
RUNS = "pact:runs"
#: Stream of submitted trees waiting for the scheduler service.
SUBMISSIONS = "pact:submissions"
#: Consumer group of the scheduler service on :data:`SUBMISSIONS`.
SUBMISSIONS_GROUP = "service"
#: Approximate cap on the length of the submissions stream.
SUBMISSIONS_MAXLEN = 10_000
#: Held (SET NX with a TTL) by the one running scheduler service.
SERVICE_LOCK = "pact:service:lock"

#: Time to live of the current-attempt (fencing) keys and the done markers: far longer
#: than any run, short enough that finished runs clean up after themselves.
CURRENT_ATTEMPT_TTL_S = 7 * 24 * 3600
DONE_TTL_S = 7 * 24 * 3600
#: Time to live of an action cache entry, renewed by every hit.
ACTION_CACHE_TTL_S = 30 * 24 * 3600


def artifact(digest: str) -> str:
    """The key of one artifact blob, e.g. ``pact:artifact:sha256:<hex>``."""
    return f"pact:artifact:{digest}"


def action(key: str) -> str:
    """The action cache entry of one action key, e.g. ``pact:cache:sha256:<hex>``."""
    return f"pact:cache:{key}"


def run_results(run_id: str) -> str:
    """The results stream of a single ``pact run --executor celery``."""
    return f"{RESULTS_STREAM}:{run_id}"


def _item(run_id: str, component_id: str, phase: str) -> str:
    # str() of a Phase (a StrEnum) is its value, so a Phase and its value build the
    # same key.
    return f"{run_id}:{component_id}:{phase!s}"


def current_attempt(run_id: str, component_id: str, phase: str) -> str:
    """The attempt number the scheduler considers current for a work item."""
    return f"pact:attempt:{_item(run_id, component_id, phase)}"


def lease(run_id: str, component_id: str, phase: str, attempt: int) -> str:
    """The lease of one attempt: present while it is queued or running."""
    return f"pact:lease:{_item(run_id, component_id, phase)}:{attempt:d}"


def done(run_id: str, component_id: str, phase: str, attempt: int) -> str:
    """Set once by the worker that published the result of one attempt."""
    return f"pact:done:{_item(run_id, component_id, phase)}:{attempt:d}"


def worker(worker_id: str) -> str:
    """The heartbeat key of one worker process."""
    return f"pact:worker:{worker_id}"


#: SCAN pattern matching every worker heartbeat key.
WORKER_PATTERN = "pact:worker:*"
