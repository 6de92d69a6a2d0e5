"""A plain Celery app for bench/fleet.py: the baseline the fleet is compared with.

Same broker, same serializer, late acks and prefetch 1 like the fleet; results
come back through Celery's Redis result backend, as a plain Celery user would
get them.
"""

from __future__ import annotations

import os

from celery import Celery

app = Celery("bench_plain")


@app.on_configure.connect
def _configure(sender: Celery, **_: object) -> None:
    url = os.environ["PACT_BROKER_URL"]
    sender.conf.update(
        broker_url=url,
        result_backend=url,
        task_serializer="json",
        accept_content=["json"],
        task_acks_late=True,
        worker_prefetch_multiplier=1,
        task_default_queue="bench.plain",
    )


@app.task(name="bench.noop")
def noop(component_id: str) -> str:
    return component_id
