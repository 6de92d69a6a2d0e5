"""The Redis client's own CPU per work item, with hiredis and without, side by side.

What the scheduler asks of Redis per loop step, for a step of ``--batch`` items: the
items' outputs written to the fleet's artifact store with the renewals of what their
tasks name (``RedisBlobStore.put_and_renew``: one pipeline of SET EX and EXPIRE), their
results read from a stream and acknowledged (XREADGROUP, XACK), and their outputs read
back (``RedisBlobStore.get_blobs``: one MGET). The entries are added by the same
process, timed apart and left out (on a fleet the workers add them). Each variant runs
in a process of its own, so that one imports hiredis and the other cannot; the two
alternate for ``--rounds`` rounds, and the medians are compared. Only the client's
work is measured: packing commands and parsing replies, which redis-py does in C when
hiredis is installed (``redis[hiredis]``) and in Python otherwise.

    .venv/bin/python bench/redis_client.py                  # a private redis-server
    .venv/bin/python bench/redis_client.py --broker redis://127.0.0.1:6379/9
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from redis.typing import EncodableT, FieldT  # noqa: E402

from bench.processes import given_redis, private_redis  # noqa: E402

#: A result entry's fields, of the sizes the fleet's results have.
_FIELDS: dict[FieldT, EncodableT] = {
    "attempt": "a" * 40,
    "item": "component-0123/implement",
    "status": "succeeded",
    "output": "sha256:" + "0" * 64,
    "usage": json.dumps({"input_tokens": 1200, "output_tokens": 800, "cost_usd": 0.0123}),
    "worker": "coder@host-17",
    "fence": "1234",
}


def one_round(url: str, steps: int, batch: int) -> float:
    """CPU seconds of this process's Redis client for ``steps`` steps of ``batch``
    items (the stream entries' XADDs not counted)."""
    from pact_workers.artifacts import digest_bytes
    from pact_workers.fleet.blobs import RedisBlobStore
    from pact_workers.fleet.connection import redis_from_url

    client = redis_from_url(url)
    stream, group = f"bench:results:{os.getpid()}", "scheduler"
    client.xgroup_create(stream, group, id="0", mkstream=True)
    store = RedisBlobStore(client, ttl_s=600)
    named = store.put_blobs([os.urandom(600) for _ in range(4)])  # a contract, tests...
    spent = 0.0
    try:
        for step in range(steps):
            outputs = [os.urandom(1500) + step.to_bytes(4, "big") for _ in range(batch)]
            for _ in range(batch):
                client.xadd(stream, _FIELDS)  # the workers' part: not timed
            started = time.process_time()
            store.put_and_renew(outputs, named)
            got = client.xreadgroup(group, "scheduler-1", {stream: ">"}, count=batch)
            ids = [entry_id for _, entries in _entries(got) for entry_id, _ in entries]
            client.xack(stream, group, *ids)
            store.get_blobs([digest_bytes(data) for data in outputs])
            spent += time.process_time() - started
    finally:
        client.delete(stream)
    return spent


def _entries(reply: Any) -> list[tuple[Any, list[tuple[Any, Any]]]]:
    """XREADGROUP's reply as (stream, entries), from RESP2's list or RESP3's map."""
    return list(reply.items()) if isinstance(reply, dict) else [tuple(r) for r in reply]


def _child(variant: str, url: str, steps: int, batch: int) -> float:
    """One round in a process of its own; ``without`` cannot import hiredis."""
    code = (
        "import sys\n"
        + ("sys.modules['hiredis'] = None\n" if variant == "without" else "")
        + "from redis.utils import HIREDIS_AVAILABLE\n"
        + f"assert HIREDIS_AVAILABLE is {variant == 'with'}, 'hiredis is not installed'\n"
        + "from bench.redis_client import one_round\n"
        + f"print(one_round({url!r}, {steps}, {batch}))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True
    )
    return float(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=500)
    parser.add_argument("--batch", type=int, default=16, help="items per loop step")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--broker", help="redis:// URL (default: a private redis-server)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    items = args.steps * args.batch
    runs: dict[str, list[float]] = {"with": [], "without": []}
    with given_redis(args.broker) if args.broker else private_redis() as broker:
        for _ in range(args.rounds):
            for variant in runs:
                runs[variant].append(_child(variant, broker.url, args.steps, args.batch))
    per_item = {v: 1000 * statistics.median(s) / items for v, s in runs.items()}
    result = {
        "items": items,
        "batch": args.batch,
        "rounds": args.rounds,
        "client_cpu_ms_per_item_with_hiredis": round(per_item["with"], 4),
        "client_cpu_ms_per_item_without": round(per_item["without"], 4),
        "ratio_with_against_without": round(per_item["with"] / per_item["without"], 3),
        "each_s": {v: [round(s, 3) for s in seconds] for v, seconds in runs.items()},
    }
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        for key, value in result.items():
            print(f"{key:38} {value}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
