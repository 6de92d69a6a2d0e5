"""Every Redis key pact-fleet uses, in one place (prefix ``pact:``).

Build keys only with the functions and constants here, so that this table stays the
whole truth about what pact-fleet keeps in Redis. Each entry: key pattern, type, TTL,
writer -> reader, then what it is for.

Ours (prefix ``pact:``)::

    pact:artifact:sha256:<hex>          string  7 days (PACT_ARTIFACT_TTL_S), renewed by
                                                each write      worker, scheduler -> both
        One blob of the artifact store (its bytes), content-addressed. Redis carries
        blobs between machines; the durable copy of a run's is its project's
        ``.pact/artifacts``. Each write (SET EX) renews the blob: the scheduler writes a
        dispatch's inputs, a worker its outputs, the action cache an entry's files when
        it records it and at each hit. A blob that expired is sent again from the
        scheduler's copy with the next dispatch that needs it.
    pact:cache:sha256:<hex>             string  as its files (PACT_ARTIFACT_TTL_S),
                                                renewed by each hit
                                                                scheduler -> scheduler (any run)
        The action cache: one entry per action key (JSON: the verified result's bundle
        digest, what producing it cost, the run that recorded it), written only once
        the run's log holds the success; its files are ``pact:artifact:`` blobs, kept
        as long (an entry whose files Redis lost is a miss). See ``scheduler.cache``.
    pact:results                        stream  no TTL, MAXLEN ~100 000
                                                                (none since per-run streams)
        The results stream of scheduler services before runs had streams of their own;
        nothing writes it now. ``ResultStream``'s tests and benchmarks still use the name.
    pact:results:<run>                  stream  no TTL; 24 h once the run ends;
                                                MAXLEN ~100 000 worker -> the run's owner
        The results of one run's attempts (field ``result`` = ResultMessage JSON): a
        task's ``reply_to``. Consumer group ``scheduler`` with one consumer, also
        ``scheduler``: whoever owns the run (``pact run --executor celery``, or the
        scheduler service holding ``pact:owner:<run>``). A new owner reads what the
        last one was delivered and never acknowledged first (same consumer name), and
        claims entries idle for a lease TTL (XAUTOCLAIM) that a paused ex-owner read.
    pact:attempt:<run>:<comp>:<phase>   string  7 days          scheduler -> worker
        The attempt number the scheduler considers current: the fencing token a
        worker checks before it starts (a missing key counts as current).
    pact:lease:<run>:<comp>:<phase>:<n> string  queued/sent: 24 h; running: ~10 s, renewed
                                                                scheduler, worker -> scheduler
        ``queued`` (recorded, about to be sent), ``sent`` (the task message is on its
        queue; no worker yet) or ``running:<worker id>``. A running lease that expires
        means the worker is gone: the scheduler dispatches n + 1. A scheduler adopting
        a run dispatches again only the attempts still ``queued`` (maybe never sent).
    pact:done:<run>:<comp>:<phase>:<n>  string  7 days          worker -> worker
        SET NX by the worker that publishes the result of attempt n: one result each.
    pact:worker:<id>                    string  3 heartbeats    worker -> workers, doctor, run
        A live worker process (Celery's hostname): JSON of roles, hostname, pid,
        concurrency, start and heartbeat time; written every 5 s
        (``PACT_WORKER_HEARTBEAT_S``), deleted when the worker stops cleanly.
    pact:runs                           hash    no TTL          submit, scheduler -> pact runs
        Run id -> JSON registry entry (project dir, state, counts, last owner and
        since when). Fields are merged in Redis (one script), never read-modify-written.
    pact:runs:active                    set     no TTL          scheduler -> schedulers
        Ids of the runs in state ``active``: what schedulers look through for runs
        whose owner's lease expired (adoption), without reading every entry.
    pact:runs:fence                     hash    no TTL          scheduler -> scheduler
        Run id -> the last fencing token issued for it (HINCRBY): each acquisition of
        a run's lease gets a larger token than any before it.
    pact:owner:<run>                    string  lease TTL (10 s), renewed every loop
                                                                scheduler -> schedulers, pact runs
        ``<token> <scheduler id>``: the scheduler service that owns the run. Set only
        when absent (with a new token), extended only by its holder (compare and
        extend), checked before every fsynced append to the run's audit log, deleted
        by its holder on a clean stop or when the run ends. Expired: any scheduler may
        adopt the run.
    pact:runs:in_flight                 hash    no TTL; a run's entry dropped when it ends,
                                                or 6 lease TTLs after its last count
                                                                scheduler -> schedulers
        Run id -> JSON: its attempts in flight per role as its owner last counted them
        (every loop), the Redis time of that count and who made it. What the global
        in-flight caps count: a run's attempts stay counted while it changes owner.
    pact:schedulers                     hash    entries dropped 2 lease TTLs after
                                                their last loop     scheduler -> schedulers
        Scheduler id -> JSON: slots granted in its last loop (``reserved``), ready
        items per role, runs driven, role caps, host, pid, Redis time of its last
        loop. Read and written, with ``pact:runs:in_flight``, in one script per loop:
        the global in-flight caps per role and the share of new runs each takes.
    pact:cancel:<run>                   string  1 day           pact cancel -> the run's owner
        A cancel request for a fleet run (JSON: who, why, which items), taken (GETDEL)
        by the scheduler driving the run at its next turn, which logs ``run_cancelled``
        and revokes the fenced attempts' tasks. See ``scheduler.lifecycle.cancel``.
    pact:review:<run>                   list    1 day           pact approve, reject -> run's owner
        Human review decisions for a fleet run that a scheduler drives (JSON each: the
        item, approved or not, who, the note), RPUSHed by ``pact approve`` / ``pact
        reject --broker`` and taken (LRANGE + DEL in one transaction) by the scheduler
        driving the run at its next turn, which logs ``review_decided`` for each item
        still awaiting review. A run nobody drives gets the decision in its log and is
        marked active again in ``pact:runs`` for a service to adopt. See
        ``scheduler.gates.fleet``.
    pact:plan:<id>                      list    1 hour          worker -> pact plan
        The answer to one planning call of ``pact plan --executor celery`` (JSON: the
        interviewer's or decomposer's answer and its usage, or the error), RPUSHed by
        the worker that took the call from ``pact.interviewer`` / ``pact.decomposer``
        and BLPOPed by the waiting ``pact plan``. See ``pact_workers.fleet.planning``.
    pact:submissions                    stream  no TTL, MAXLEN ~10 000
                                                                submit -> scheduler services
        Submitted trees waiting for a service; consumer group ``service``, one consumer
        per scheduler process (its id). An entry pending with a consumer for longer
        than a lease TTL (the scheduler died before it acknowledged it) is claimed by
        another (XAUTOCLAIM); the run's lease decides who creates the run. A consumer
        leaves the group when its scheduler stops cleanly, or a day after its last
        read with nothing pending.

``<run>`` is a run id (hex from ``pact submit``; :data:`RUN_ID_PATTERN` is what any
reader of the keys accepts), ``<comp>`` a component id (a Python identifier),
``<phase>`` a :class:`~pact_workers.models.work.Phase` value (``contract``, ``test``,
``implement``, ``integrate``) and ``<n>`` an attempt number (>= 1): none of them can
contain ``:``, so every key splits back into its parts. The artifact digest and the
action key are the parts with a ``:`` in them (``sha256:<hex>``); each is always the
last part.

Celery's, on the broker database (not ours: never edit them by hand)::

    pact.<role>                         list    a task queue per role (pact.code_author...);
                                                priority queues add a \\x06\\x16<n> suffix;
                                                the scheduler reads the task ids of a short
                                                one to find attempts whose message is lost
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

#: What a run id may be: it names the run's directory under the runs directory and is
#: a part of keys, so no ``/``, ``:``, ``.`` or ``..``, nothing empty or long.
RUN_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$"

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
#: A submission's priority runs from 0 (the default) to this: more gets more turns.
MAX_PRIORITY = 9
#: Set of the ids of active runs (adoption looks through it).
ACTIVE_RUNS = "pact:runs:active"
#: Hash: run id -> last fencing token issued for the run's lease.
RUN_FENCES = "pact:runs:fence"
#: Hash: scheduler id -> JSON of its last grant, demand and caps per role.
SCHEDULERS = "pact:schedulers"
#: Hash: run id -> JSON of its attempts in flight per role (the global caps count them).
RUNS_IN_FLIGHT = "pact:runs:in_flight"
#: How long a finished run's result stream is kept for late duplicates.
FINISHED_RESULTS_TTL_S = 24 * 3600

#: Time to live of the current-attempt (fencing) keys and the done markers: far longer
#: than any run, short enough that finished runs clean up after themselves.
CURRENT_ATTEMPT_TTL_S = 7 * 24 * 3600
DONE_TTL_S = 7 * 24 * 3600
#: Time to live of an artifact blob, renewed by every write; ``PACT_ARTIFACT_TTL_S``
#: sets it (see :func:`pact_workers.fleet.blobs.artifact_ttl_s`).
ARTIFACT_TTL_S = 7 * 24 * 3600


def artifact(digest: str) -> str:
    """The key of one artifact blob, e.g. ``pact:artifact:sha256:<hex>``."""
    return f"pact:artifact:{digest}"


def action(key: str) -> str:
    """The action cache entry of one action key, e.g. ``pact:cache:sha256:<hex>``."""
    return f"pact:cache:{key}"


def run_results(run_id: str) -> str:
    """The results stream of one run (the ``reply_to`` of its tasks)."""
    return f"{RESULTS_STREAM}:{run_id}"


def owner(run_id: str) -> str:
    """The lease of the scheduler service that owns a run: ``<token> <scheduler id>``."""
    return f"pact:owner:{run_id}"


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


#: How long a cancel request waits for the scheduler driving its run.
CANCEL_TTL_S = 24 * 3600


def cancel_request(run_id: str) -> str:
    """A ``pact cancel`` request for a fleet run, taken by the run's owner."""
    return f"pact:cancel:{run_id}"


#: How long a review decision waits for the scheduler driving its run.
REVIEW_TTL_S = 24 * 3600


def review_requests(run_id: str) -> str:
    """Human review decisions for a fleet run, taken by the run's owner."""
    return f"pact:review:{run_id}"


#: How long a planning answer waits for the ``pact plan`` that asked for it.
PLAN_REPLY_TTL_S = 3600


def plan_reply(plan_id: str) -> str:
    """Where a worker puts its answer to one planning call."""
    return f"pact:plan:{plan_id}"


def worker(worker_id: str) -> str:
    """The heartbeat key of one worker process."""
    return f"pact:worker:{worker_id}"


#: SCAN pattern matching every worker heartbeat key.
WORKER_PATTERN = "pact:worker:*"
