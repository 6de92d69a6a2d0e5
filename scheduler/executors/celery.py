"""The Celery executor: attempts run on the fleet, results come back through Redis.

:class:`CeleryFleet` is the connection a scheduler process shares between its
runs: it sends task messages to the role queues, reads the runs' result streams
with a consumer group, and watches the leases of what it sent. Each run has a
stream of its own (``pact:results:<run>``, its tasks' ``reply_to``), so results
reach whichever scheduler owns the run, and a scheduler that gives a run up leaves
its unacknowledged results to the next owner.
:class:`scheduler.executors.celery_executor.CeleryExecutor` is one run's view of it,
with the same interface as the local executor.

Failure detection is the scheduler's, not the broker's: an attempt whose lease
is gone (and whose worker left no "done" marker) is reported lost within about
one lease TTL, and the run loop dispatches a new attempt at once. The broker's
own redelivery of the dead worker's message comes much later and is refused by
the worker, because its attempt is no longer the current one.
"""

from __future__ import annotations

import logging
import math
import time
from collections import defaultdict
from typing import Any

from celery import Celery

from pact_workers.app import QUEUES, TASK_NAMES, fleet_config
from pact_workers.fleet import keys
from pact_workers.fleet.connection import check_redis_url, redis_from_url
from pact_workers.fleet.leases import QUEUED, RUNNING, SENT, VERIFY_SUFFIX, Leases
from pact_workers.fleet.results import ResultStreams
from pact_workers.models.work import Phase, ResultMessage, TaskMessage
from scheduler.executors.base import LostAttempt
from scheduler.executors.messages import CLAIM_GRACE_S, queued_task_ids, taken_task_ids, why_lost
from scheduler.executors.packing import Packer, fleet_slots, max_pack_from_env, message_of

log = logging.getLogger(__name__)

Lease = tuple[str, str, Phase, int]  # run_id, component_id, phase, attempt

ROLE_OF_QUEUE = {queue: role for role, queue in QUEUES.items()}

#: Publishing retries while the broker restarts.
SEND_RETRY_POLICY = {
    "max_retries": 60,
    "interval_start": 0.1,
    "interval_step": 0.5,
    "interval_max": 2.0,
}


class CeleryFleet:
    """One scheduler process's connection to the fleet (shared by all its runs)."""

    def __init__(
        self,
        broker_url: str,
        *,
        stream: str | None = None,
        consumer: str = "scheduler",
        lease_ttl_s: float = 10.0,
        claim_grace_s: float = CLAIM_GRACE_S,
        claim_idle_ms: int = 30_000,
        max_pack: int | None = None,
    ) -> None:
        """``stream``: one stream for every result (default: each run's own,
        :func:`keys.run_results`, attached by :meth:`attach` or the first submit).
        ``max_pack``: the most short attempts sent in one message (1: each alone;
        default ``PACT_MAX_PACK``, else 8; see :mod:`scheduler.executors.packing`)."""
        self.broker_url = check_redis_url(broker_url)
        self.client = redis_from_url(self.broker_url)
        self.stream = stream
        self.leases = Leases(self.client, ttl_s=lease_ttl_s)
        self.results = ResultStreams(self.client, consumer=consumer, claim_idle_ms=claim_idle_ms)
        if stream is not None:
            self.results.attach(stream)
        self.celery = Celery("pact_scheduler", set_as_current=False)
        self.celery.conf.update(fleet_config(self.broker_url))
        self._in_flight: dict[Lease, float] = {}
        #: Stream entries of each result read and not yet acknowledged.
        self._entries: dict[str, list[tuple[str, str]]] = defaultdict(list)
        #: Entries whose results are logged, acknowledged in one XACK per stream at the
        #: next read: a crash before that only means a redelivery, which the fencing drops.
        self._acked: dict[str, list[str]] = defaultdict(list)
        self._outbox: list[TaskMessage] = []
        self._adopted: set[Lease] = set()
        self._taken_since: dict[Lease, float] = {}
        #: The role queue each attempt's message went to (unknown for adopted ones).
        self._queue_of: dict[Lease, str] = {}
        #: Since when each sent attempt's message has been found nowhere on the broker.
        self._missing_since: dict[Lease, float] = {}
        #: Per role queue: when its waiting messages were last read, and their task ids
        #: (``None``: too many to read); see :meth:`_nowhere`.
        self._queue_seen: dict[str, tuple[float, set[str] | None]] = {}
        #: Per run: the stage each running attempt's lease reported (see :meth:`stages`).
        self._stages: dict[str, dict[tuple[str, Phase, int], str]] = defaultdict(dict)
        #: How long a taken message may go unclaimed before its attempt counts as lost.
        self.claim_grace_s = claim_grace_s
        #: Per run, how often the leases (and requests left in Redis) are read: a busy
        #: loop turns many times a second, and a lost worker needs noticing within a
        #: lease TTL, not within a turn.
        self.check_every_s = min(1.0, lease_ttl_s / 4)
        self._checked: dict[tuple[str, str], float] = {}
        #: Role queues this process has declared to the broker (see :meth:`_publish`).
        self._declared: set[str] = set()
        self.packer = Packer(
            lambda: fleet_slots(self.client),
            max_pack=max_pack_from_env() if max_pack is None else max_pack,
        )

    def stream_of(self, run_id: str) -> str:
        """Where the results of ``run_id``'s attempts are published."""
        return self.stream or keys.run_results(run_id)

    def attach(self, run_id: str) -> None:
        """Read the results of ``run_id`` (first those its last reader left unacknowledged)."""
        self.results.attach(self.stream_of(run_id))

    def submit(self, task: TaskMessage) -> None:
        """Queue ``task`` for sending; :meth:`flush` (or the next read) sends the batch."""
        self.attach(task.run_id)
        self._outbox.append(task.model_copy(update={"reply_to": self.stream_of(task.run_id)}))

    def flush(self) -> None:
        """Send what was submitted: the fencing tokens and leases of the whole batch in
        one round trip, then the messages (one more round trip, see :meth:`_send`), then
        one round trip marking them sent. The audit log already holds each dispatch, so
        a crash before this point re-dispatches them on recovery."""
        batch, self._outbox = self._outbox, []
        if not batch:
            return
        self.leases.dispatch_many(batch)
        in_flight: dict[str, int] = defaultdict(int)
        for queue in self._queue_of.values():
            in_flight[ROLE_OF_QUEUE[queue]] += 1
        self._send(self.packer.packs(batch, in_flight))
        now = time.monotonic()
        for task in batch:
            self._in_flight[_lease(task)] = now
            self._queue_of[_lease(task)] = QUEUES[task.role.value]
        # A scheduler that adopts the run later knows these need no second dispatch.
        self.leases.mark_sent(batch)

    def _send(self, messages: list[list[TaskMessage]]) -> None:
        """Publish ``messages`` (each one attempt, or a pack of one role's): in one
        pipeline where kombu batches publishes (5.7 and later), else one message at a
        time. A batch that fails (the broker restarting) is sent again one message at
        a time with the retry policy that waits for the broker; a message the failed
        pipeline had delivered is then sent twice, which is harmless: the two copies
        are one attempt, and only its first result counts (the done marker)."""
        if len(messages) > 1:
            try:
                with self.celery.producer_or_acquire() as producer:
                    batching = getattr(producer, "batch", None)
                    if batching is not None:
                        with batching(max_size=len(messages)):
                            for tasks in messages:
                                self._publish(tasks, producer=producer, retry=False)
                        return
            except Exception as exc:  # the per-message path then decides
                log.warning("batched publish failed (%s); sending one at a time", exc)
                self._declared.clear()  # the broker may have restarted: declare again
        for tasks in messages:
            self._publish(tasks, retry=True)

    def _publish(self, tasks: list[TaskMessage], *, retry: bool, producer: Any = None) -> None:
        """Send one task message: one attempt, or a pack (a list of attempts). Its queue
        is declared with the first message this process sends to it (Celery declares
        it with every message otherwise, which costs a copy of the queue each time, and
        the declaration stays: the workers declare their queues too, and the fleet's
        Redis persists)."""
        task = tasks[0]
        role = task.role.value  # the phase's role, or the auditor for an audit
        queue = QUEUES[role]
        args, options = message_of(tasks, task_id)
        self.celery.send_task(
            TASK_NAMES[role],
            args=args,
            queue=queue,
            **({"declare": []} if queue in self._declared else {}),
            **options,
            producer=producer,
            retry=retry,
            retry_policy=SEND_RETRY_POLICY,
        )
        self._declared.add(queue)

    def withdraw(self, leases: list[Lease]) -> None:
        """Never send the tasks of ``leases`` that are still in the outbox (cancelled in
        the tick that dispatched them): sent later, they would make themselves current
        again, past the cancel's fencing."""
        drop = set(leases)
        self._outbox = [task for task in self._outbox if _lease(task) not in drop]

    def read(self, timeout_s: float) -> list[ResultMessage]:
        self.flush()
        self.flush_acks()
        out = []
        for delivery in self.results.read(block_ms=max(int(timeout_s * 1000), 0)):
            result = delivery.result
            if self.stream is None and delivery.stream != keys.run_results(result.run_id):
                log.error(
                    "result entry %s on %s names run %s; dropped",
                    delivery.entry_id,
                    delivery.stream,
                    result.run_id,
                )
                self.results.ack(delivery.stream, [delivery.entry_id])
                continue
            self._entries[result.idempotency_key].append((delivery.stream, delivery.entry_id))
            queue = self._queue_of.get(_lease(result))
            if queue is not None:
                self.packer.observe(ROLE_OF_QUEUE[queue], result.duration_s)
            out.append(result)
        return out

    def ack(self, result: ResultMessage) -> None:
        for stream, entry_id in self._entries.pop(result.idempotency_key, []):
            self._acked[stream].append(entry_id)
        self._forget_attempt(_lease(result))

    def flush_acks(self) -> None:
        acked, self._acked = self._acked, defaultdict(list)
        for stream, entry_ids in acked.items():
            self.results.ack(stream, entry_ids)

    def adopt(self, leases: list[Lease]) -> None:
        """Watch attempts a previous scheduler dispatched. One still ``queued`` may never
        have been sent (the scheduler died between recording and sending it), so it is
        reported lost and dispatched again under a new attempt number; if its message
        does exist, the worker that takes it finds it superseded and skips it."""
        for lease in leases:
            self._in_flight.setdefault(lease, time.monotonic())
            self._adopted.add(lease)

    def due(self, run_id: str, what: str) -> bool:
        """True when ``what`` (a check of ``run_id`` that reads Redis) was last done at
        least :attr:`check_every_s` ago, and marks it done now."""
        now = time.monotonic()
        if now - self._checked.get((run_id, what), -math.inf) < self.check_every_s:
            return False
        self._checked[(run_id, what)] = now
        return True

    def alive(self, run_id: str) -> list[tuple[str, Phase, int]]:
        """Attempts a worker is running (a ``queued`` lease is no sign of life); read
        from the leases at most every :attr:`check_every_s` (empty in between)."""
        mine = [k for k in self._in_flight if k[0] == run_id]
        if not mine or not self.due(run_id, "alive"):
            return []
        states = self.leases.states([(r, c, p.value, a) for r, c, p, a in mine])
        alive = []
        for r, c, p, a in mine:
            state = states.get((r, c, p.value, a)) or b""
            if state.startswith(RUNNING):
                alive.append((c, p, a))
                # What the lease says the attempt does, for stages().
                stage = "verify" if state.endswith(VERIFY_SUFFIX) else "agent"
                self._stages[run_id][(c, p, a)] = stage
        return alive

    def stages(self, run_id: str) -> list[tuple[tuple[str, Phase, int], str]]:
        """What the leases said each running attempt of ``run_id`` does when
        :meth:`alive` last read them (``agent`` or ``verify``), taken as read."""
        return list(self._stages.pop(run_id, {}).items())

    def lost(self, run_id: str) -> list[LostAttempt]:
        """Attempts of ``run_id`` with neither a lease nor a done marker (the worker died),
        adopted attempts still queued (see :meth:`adopt`), attempts whose message a
        worker took but never claimed, and sent attempts whose message is nowhere on
        the broker (see :mod:`scheduler.executors.messages`); each reported once. Read
        at most every :attr:`check_every_s` (empty in between)."""
        mine = [k for k in self._in_flight if k[0] == run_id]
        if not mine or not self.due(run_id, "lost"):
            return []
        states = self.leases.states([(r, c, p.value, a) for r, c, p, a in mine])
        pipe = self.client.pipeline(transaction=False)
        for r, c, p, a in mine:
            pipe.type(keys.done(r, c, p.value, a))
        # A key of another type by a done marker's name is no marker (anyone can write
        # Redis); a worker's publish deletes it.
        done = [kind in (b"string", "string") for kind in pipe.execute()]
        state_of = {k: states.get((k[0], k[1], k[2].value, k[3])) for k in mine}
        waiting = [k for k in mine if state_of[k] in (QUEUED, SENT)]
        taken = taken_task_ids(self.client) if waiting else set()
        now = time.monotonic()
        nowhere = self._nowhere([k for k in waiting if state_of[k] == SENT], taken, now)
        gone = []
        for lease, finished in zip(mine, done, strict=True):
            state = state_of[lease]
            unsent = lease in self._adopted and state == QUEUED
            self._adopted.discard(lease)
            # A worker took the message (it is in the broker's unacked hash) but never
            # claimed the lease: it died in between, or could not reach Redis to claim.
            if state in (QUEUED, SENT) and task_id_of(lease) in taken:
                since = self._taken_since.setdefault(lease, now)
                unclaimed = now - since > self.claim_grace_s
            else:
                self._taken_since.pop(lease, None)
                unclaimed = False
            if lease not in nowhere:
                self._missing_since.pop(lease, None)
            vanished = now - nowhere.get(lease, now) > self.claim_grace_s
            why = why_lost(
                expired=state is None and not finished,
                unsent=unsent,
                unclaimed=unclaimed,
                vanished=vanished,
                grace_s=self.claim_grace_s,
            )
            if why is not None:
                self._forget_attempt(lease)
                gone.append(LostAttempt(lease[1:], why))
        return gone

    def _nowhere(self, sent: list[Lease], taken: set[str], now: float) -> dict[Lease, float]:
        """Since when each attempt of ``sent`` (lease ``sent``) that no worker took has
        had its message nowhere: not taken, not on its queue. Only attempts sent at
        least :attr:`claim_grace_s` ago are looked for; a queue is read at most every
        quarter of it, whichever runs' attempts are looked for (in between, what the
        last read found stands)."""
        suspects = [
            k
            for k in sent
            if task_id_of(k) not in taken and now - self._in_flight[k] >= self.claim_grace_s
        ]
        if not suspects:
            return {}
        every = list(QUEUES.values())
        where = {k: [self._queue_of[k]] if k in self._queue_of else every for k in suspects}
        due = {
            q
            for qs in where.values()
            for q in qs
            if now - self._queue_seen.get(q, (-math.inf, None))[0] >= self.claim_grace_s / 4
        }
        if due:
            for queue, ids in queued_task_ids(self.client, due).items():
                self._queue_seen[queue] = (now, ids)
        for lease in suspects:
            seen = [self._queue_seen[q] for q in where[lease]]
            if any(ids is None or task_id_of(lease) in ids for _, ids in seen):
                self._missing_since.pop(lease, None)  # waiting, or maybe waiting
            else:
                self._missing_since.setdefault(lease, min(at for at, _ in seen))
        return {k: self._missing_since[k] for k in suspects if k in self._missing_since}

    def _forget_attempt(self, lease: Lease) -> None:
        self._in_flight.pop(lease, None)
        self._taken_since.pop(lease, None)
        self._missing_since.pop(lease, None)
        self._queue_of.pop(lease, None)

    def forget_run(self, run_id: str, *, finished: bool = False) -> None:
        """Stop watching ``run_id``: its attempts, and (unless one stream serves every
        run) its result stream. Results read and not acknowledged stay pending for the
        next owner. ``finished``: the run ended; its stream expires after a day (late
        duplicates land there, and nobody reads them)."""
        for lease in [k for k in self._in_flight if k[0] == run_id]:
            self._forget_attempt(lease)
            self._adopted.discard(lease)
        for key in [k for k in self._entries if k.startswith(f"{run_id}:")]:
            del self._entries[key]
        for check in [k for k in self._checked if k[0] == run_id]:
            del self._checked[check]
        if self.stream is None:
            stream = keys.run_results(run_id)
            self.results.detach(stream)
            if finished:
                self.flush_acks()
                self.client.expire(stream, keys.FINISHED_RESULTS_TTL_S)

    def close(self) -> None:
        try:
            self.flush()
            self.flush_acks()
        finally:
            self.client.close()


def task_id(task: TaskMessage) -> str:
    return task_id_of(_lease(task))


def task_id_of(lease: Lease) -> str:
    run_id, component_id, phase, attempt = lease
    return f"{run_id}.{component_id}.{phase.value}.{attempt}"


def _lease(msg: TaskMessage | ResultMessage) -> Lease:
    return (msg.run_id, msg.component_id, msg.phase, msg.attempt)
