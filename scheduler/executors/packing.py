"""Packs: several short attempts of one role in one task message.

Each Celery message costs the fleet about as much as a short attempt itself: the
scheduler builds and publishes it, the worker receives it, hands it to a pool
process, sends its task events and acknowledges it. When a role's attempts are
short, that overhead is most of what the fleet spends on them. So the scheduler
sends them in packs, one message for up to :data:`MAX_PACK` attempts, when both hold:

- the role's attempts have been short: the moving average of the durations its
  workers reported is at most :data:`PACK_BELOW_S` (nothing is packed before the
  role's first result, and a role whose attempts turn slow stops being packed);
- more of the role's attempts are in flight than the live workers serving it have
  slots (their heartbeats say; see :func:`fleet_slots`). Those beyond the slots would
  wait on the queue anyway; a pack of ``ceil(in flight / slots)`` waits in a pool
  process instead. What that costs: a pack's members run one after the other on one
  process, where lone messages would each go to the first process free (and to a
  worker that joins meanwhile); with attempts this short, little.

Within a pack each attempt keeps everything it has alone: its fencing token and
lease (claimed when the worker takes the pack, kept alive while it waits its turn),
its result, its place in the audit log. A member superseded meanwhile is skipped.
The attempts of one flush are dealt round-robin, so that the first of each pack are
the most urgent of the batch (the batch comes critical path first).

A pack's message names its members' task ids in the ``pact_pack`` header, so that a
scheduler looking for an attempt's message on the broker finds it (see
:mod:`scheduler.executors.messages`), whichever scheduler sent it.
"""

from __future__ import annotations

import math
import os
import time
from collections import defaultdict
from collections.abc import Callable, Mapping
from typing import Any

import redis

from pact_workers.envvars import whole_number
from pact_workers.fleet.heartbeats import live_workers
from pact_workers.models.work import TaskMessage

#: The most attempts one message carries.
MAX_PACK = 8
#: A role whose attempts take at most this long on average (seconds) is packed.
PACK_BELOW_S = 2.0
#: Weight of each new duration in a role's moving average.
DURATION_WEIGHT = 0.3
#: How long a reading of the fleet's slots is used (its heartbeats come every 5 s).
SLOTS_EVERY_S = 5.0
#: The message header naming a pack's members' task ids.
PACK_HEADER = "pact_pack"


def max_pack_from_env(environ: Mapping[str, str] = os.environ) -> int:
    """The most attempts one message carries: ``PACT_MAX_PACK``, else :data:`MAX_PACK`
    (1 sends every attempt alone).

    Raises:
        InputError: the variable is not a whole number of at least 1.
    """
    return whole_number(
        environ,
        "PACT_MAX_PACK",
        MAX_PACK,
        what="the most short attempts sent in one task message",
        unset=f"1: each alone; unset: {MAX_PACK}",
    )


def fleet_slots(client: redis.Redis) -> dict[str, int]:
    """Per role, the pool slots of the live workers that serve it (a worker serving
    several roles counts for each)."""
    slots: dict[str, int] = defaultdict(int)
    for info in live_workers(client).values():
        concurrency = info.get("concurrency")
        if not isinstance(concurrency, int) or concurrency <= 0:
            continue
        for role in info.get("roles") or []:
            slots[str(role)] += concurrency
    return dict(slots)


class Packer:
    """Decides which attempts of a flush travel together (see the module docstring).

    Args:
        slots: reads the fleet's slots per role (:func:`fleet_slots` of a client).
        max_pack: the most attempts in one message; 1 sends every attempt alone.
        below_s: the average duration up to which a role's attempts are packed.
        clock: monotonic seconds (tests pass their own).
    """

    def __init__(
        self,
        slots: Callable[[], Mapping[str, int]],
        *,
        max_pack: int = MAX_PACK,
        below_s: float = PACK_BELOW_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if max_pack < 1:
            raise ValueError("max_pack must be at least 1")
        self._read_slots = slots
        self.max_pack = max_pack
        self.below_s = below_s
        self._clock = clock
        #: Per role, the moving average of its attempts' durations.
        self.mean_s: dict[str, float] = {}
        self._slots: tuple[float, Mapping[str, int]] | None = None
        #: Attempts sent in packs, and the packs (for the benchmarks and ``pact`` tests).
        self.packed_attempts = 0
        self.packs_sent = 0

    def observe(self, role: str, duration_s: float) -> None:
        """A result of ``role`` came back after ``duration_s`` of work."""
        mean = self.mean_s.get(role)
        self.mean_s[role] = (
            duration_s if mean is None else mean + DURATION_WEIGHT * (duration_s - mean)
        )

    def size(self, role: str, in_flight: int) -> int:
        """How many of ``role``'s attempts go in one message, with ``in_flight`` of them
        (this flush's included) in flight."""
        mean = self.mean_s.get(role)
        if self.max_pack == 1 or mean is None or mean > self.below_s or in_flight <= 1:
            return 1
        slots = self.slots().get(role, 0)
        if slots <= 0:
            return 1
        return max(1, min(self.max_pack, math.ceil(in_flight / slots)))

    def slots(self) -> Mapping[str, int]:
        now = self._clock()
        if self._slots is None or now - self._slots[0] >= SLOTS_EVERY_S:
            self._slots = (now, self._read_slots())
        return self._slots[1]

    def packs(
        self, batch: list[TaskMessage], in_flight: Mapping[str, int]
    ) -> list[list[TaskMessage]]:
        """``batch`` as messages: lists of one attempt, or packs of one role's.
        ``in_flight``: per role, the attempts in flight before this batch."""
        by_role: dict[str, list[TaskMessage]] = defaultdict(list)
        for task in batch:
            by_role[task.role.value].append(task)
        out: list[list[TaskMessage]] = []
        for role, tasks in by_role.items():
            k = self.size(role, in_flight.get(role, 0) + len(tasks))
            if k == 1 or len(tasks) == 1:
                out.extend([task] for task in tasks)
                continue
            count = math.ceil(len(tasks) / k)
            dealt: list[list[TaskMessage]] = [[] for _ in range(count)]
            for i, task in enumerate(tasks):
                dealt[i % count].append(task)
            for pack in dealt:
                if len(pack) > 1:
                    self.packed_attempts += len(pack)
                    self.packs_sent += 1
            out.extend(dealt)
        return out


def message_of(
    tasks: list[TaskMessage], task_id: Callable[[TaskMessage], str]
) -> tuple[list[Any], dict[str, Any]]:
    """The arguments and ``send_task`` options of one message of ``tasks``.

    One attempt: its own task id (Flower shows it, and a scheduler finds the message
    by it among those on a queue or taken by a worker). A pack: a list of attempts, a
    task id of its own, and its members' ids in :data:`PACK_HEADER`. Either way,
    ``argsrepr`` is what Flower shows for the arguments: readable, unlike the digests.
    """
    first = tasks[0]
    if len(tasks) == 1:
        return [first.model_dump(mode="json")], {
            "task_id": task_id(first),
            "argsrepr": (
                f"run={first.run_id} component={first.component_id} "
                f"phase={first.phase.value} attempt={first.attempt}"
                + (f" stage={first.stage}" if first.stage != "work" else "")
                + (f" {first.variety}" if first.variety else "")
            ),
        }
    ids = [task_id(task) for task in tasks]
    runs = ",".join(dict.fromkeys(task.run_id for task in tasks))
    return [[task.model_dump(mode="json") for task in tasks]], {
        "task_id": f"pack.{ids[0]}",
        "headers": {PACK_HEADER: ids},
        "argsrepr": (
            f"pack of {len(tasks)}: run={runs} "
            + " ".join(f"{t.component_id}/{t.phase.value}#{t.attempt}" for t in tasks)
        ),
    }
