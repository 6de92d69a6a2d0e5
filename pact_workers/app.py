"""The Celery app of the fleet: one queue per agent role.

``celery -A pact_workers.app worker -Q pact.code_author`` works as-is; ``pact worker
--roles code_author,integrator`` is the friendly form. The broker (and the Redis that
holds artifacts, leases and result streams) comes from ``PACT_BROKER_URL``, read when
the app is first configured, not at import.

Reliability, for tasks that run for minutes:

- late acks with ``task_reject_on_worker_lost``: a task whose worker dies is not lost;
- prefetch 1: a worker holds no message it is not running (a message may be a pack of
  short attempts, run one after the other, whose waiting members' leases the worker
  keeps alive: see ``fleet.packs``);
- the Redis transport's ``visibility_timeout`` (set in ``broker_transport_options``, where
  the Celery docs say it must be) above the longest hard time limit, so a long task is
  never redelivered while it still runs;
- soft and hard time limits per role (``task_annotations``);
- ``worker_cancel_long_running_tasks_on_connection_loss``: a worker that lost the broker
  stops its tasks instead of finishing work nobody will acknowledge;
- task events on, so Flower sees every task.

None of this makes recovery fast: the scheduler's leases do (see ``fleet.leases``).
"""

from __future__ import annotations

import os
from typing import Any

from celery import Celery
from kombu.entity import Queue

from pact_workers.models.work import Role

DEFAULT_BROKER_URL = "redis://localhost:6379/0"

#: Queue of each role: ``pact.<role>``.
QUEUES: dict[str, str] = {role.value: f"pact.{role.value}" for role in Role}

#: Task name of each role (what Flower lists): ``pact.<role>``.
TASK_NAMES: dict[str, str] = dict(QUEUES)

#: Stall timeout per role is the scheduler's business; these bound a whole attempt
#: (agent call plus verification) on the worker. Soft raises inside the task (the
#: attempt reports a transient timeout); hard kills the worker process.
SOFT_TIME_LIMIT_S: dict[str, int] = {
    Role.CONTRACT_AUTHOR.value: 1200,
    Role.TEST_AUTHOR.value: 1800,
    Role.CODE_AUTHOR.value: 1800,
    Role.INTEGRATOR.value: 1800,
    Role.TRACE_ANALYST.value: 900,
    Role.AUDITOR.value: 900,
}
HARD_TIME_LIMIT_GRACE_S = 60
#: Above the longest hard time limit, so the broker never redelivers a running task.
VISIBILITY_TIMEOUT_S = max(SOFT_TIME_LIMIT_S.values()) + HARD_TIME_LIMIT_GRACE_S + 600


def broker_url_from_env() -> str:
    return os.environ.get("PACT_BROKER_URL", DEFAULT_BROKER_URL)


def fleet_config(broker_url: str) -> dict[str, Any]:
    """Every Celery setting of the fleet, for one broker URL."""
    return {
        "broker_url": broker_url,
        "broker_connection_retry_on_startup": True,
        "broker_transport_options": {"visibility_timeout": VISIBILITY_TIMEOUT_S},
        "task_serializer": "json",
        "accept_content": ["json"],
        "task_ignore_result": True,
        "result_backend": None,
        "task_acks_late": True,
        "task_reject_on_worker_lost": True,
        "worker_prefetch_multiplier": 1,
        "worker_cancel_long_running_tasks_on_connection_loss": True,
        "task_queues": [Queue(name) for name in QUEUES.values()],  # type: ignore[no-untyped-call]
        "task_routes": {TASK_NAMES[role]: {"queue": QUEUES[role]} for role in QUEUES},
        "task_annotations": {
            TASK_NAMES[role]: {
                "soft_time_limit": soft,
                "time_limit": soft + HARD_TIME_LIMIT_GRACE_S,
            }
            for role, soft in SOFT_TIME_LIMIT_S.items()
        },
        # Workers send task events (Flower sees received/started/succeeded); a
        # "sent" event per dispatch would cost the scheduler a publish per item.
        "task_send_sent_event": False,
        "worker_send_task_events": True,
        "worker_hijack_root_logger": False,
    }


app = Celery("pact_workers", include=["pact_workers.tasks"])


@app.on_configure.connect  # type: ignore[untyped-decorator]
def _configure(sender: Celery, **_: Any) -> None:
    # Runs when the configuration is first needed (a worker starting, a task being
    # sent), so importing this module reads no environment.
    sender.conf.update(fleet_config(broker_url_from_env()))
