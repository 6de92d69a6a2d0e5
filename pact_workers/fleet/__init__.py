"""Redis adapters of the fleet: connections, artifact blobs, the results stream, leases.

Every key these modules use is documented in :mod:`pact_workers.fleet.keys`.
Importing this package needs ``redis`` (redis-py) installed; the embedded
(single-machine) mode never imports it.
"""

from pact_workers.fleet import keys
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
from pact_workers.fleet.leases import LeaseHold, Leases, heartbeat_worker, live_workers
from pact_workers.fleet.results import Delivery, ResultStream, publish_result

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
