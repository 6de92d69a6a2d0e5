"""Redis adapters of the fleet: connections, artifact blobs, the results stream, leases.

Every key these modules use is documented in :mod:`pact_workers.fleet.keys`.
Using them needs ``redis`` (redis-py) installed; the embedded (single-machine) mode
never imports it.
"""

from typing import TYPE_CHECKING

from pact_workers.exports import lazy_exports
from pact_workers.fleet import keys  # names only: no redis-py

__all__ = [
    "BrokerAuthError",
    "BrokerUnavailable",
    "Delivery",
    "LeaseHold",
    "Leases",
    "RedisBlobStore",
    "ResultStream",
    "check_redis_url",
    "heartbeat_worker",
    "keys",
    "live_workers",
    "publish_result",
    "redact",
    "redis_from_url",
    "retry_deadline",
    "wait_for_redis",
]

# Loaded on first use, so that ``from pact_workers.fleet import keys`` (the key names,
# which commands reading a run's state need) does not load redis-py.
_SUBMODULES = {
    "BrokerAuthError": "pact_workers.fleet.connection",
    "BrokerUnavailable": "pact_workers.fleet.connection",
    "Delivery": "pact_workers.fleet.results",
    "LeaseHold": "pact_workers.fleet.leases",
    "Leases": "pact_workers.fleet.leases",
    "RedisBlobStore": "pact_workers.fleet.blobs",
    "ResultStream": "pact_workers.fleet.results",
    "check_redis_url": "pact_workers.fleet.connection",
    "heartbeat_worker": "pact_workers.fleet.heartbeats",
    "live_workers": "pact_workers.fleet.heartbeats",
    "publish_result": "pact_workers.fleet.results",
    "redact": "pact_workers.fleet.connection",
    "redis_from_url": "pact_workers.fleet.connection",
    "retry_deadline": "pact_workers.fleet.connection",
    "wait_for_redis": "pact_workers.fleet.connection",
}

if TYPE_CHECKING:
    from pact_workers.fleet.blobs import RedisBlobStore
    from pact_workers.fleet.connection import (
        BrokerAuthError,
        BrokerUnavailable,
        check_redis_url,
        redact,
        redis_from_url,
        retry_deadline,
        wait_for_redis,
    )
    from pact_workers.fleet.heartbeats import heartbeat_worker, live_workers
    from pact_workers.fleet.leases import LeaseHold, Leases
    from pact_workers.fleet.results import Delivery, ResultStream, publish_result

__getattr__, __dir__ = lazy_exports(globals(), _SUBMODULES)
