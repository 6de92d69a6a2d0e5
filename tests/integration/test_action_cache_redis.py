"""The fleet's action cache on a real redis-server: the backends' contract suite, and
two runs of one tree through real ``pact worker`` processes sharing the cache."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from pact_workers.fleet import keys
from pact_workers.fleet.connection import redis_from_url
from pact_workers.models.work import Phase
from scheduler.audit import read_events
from scheduler.cache import ActionCache, CacheEntry, RedisActionCache
from scheduler.events import CacheDropped, CacheHit, ItemSucceeded
from scheduler.project import ProjectDir
from scheduler.rebuild import rebuild_state
from scheduler.state import RunStatus
from tests.integration.fleet import Fleet
from tests.integration.test_docker_runs import ALL_ROLES

# The contract suite every backend passes (tests/unit runs it on both backends, with
# fakeredis); collected here again with ``cache`` a RedisActionCache on a real server.
from tests.unit.test_action_cache import (  # noqa: F401
    test_a_backend_is_an_action_cache,
    test_a_malformed_key_is_refused_before_anything_is_read,
    test_a_new_entry_for_a_key_replaces_the_old_one,
    test_a_stored_entry_and_its_files_are_found_by_key,
    test_an_unknown_key_is_a_miss,
    test_files_gone_from_the_cache_are_an_artifact_error,
    test_files_that_are_not_the_entrys_result_are_refused,
)

pytestmark = pytest.mark.redis


@pytest.fixture
def client(redis_url: str) -> Iterator[redis.Redis]:
    made = redis_from_url(redis_url)
    yield made
    made.close()


@pytest.fixture
def cache(client: redis.Redis) -> ActionCache:
    return RedisActionCache(client)


def cached_entries(client: redis.Redis) -> list[CacheEntry]:
    found = []
    for name in client.scan_iter(match="pact:cache:*"):
        raw = client.get(name)
        key = name.decode().removeprefix("pact:cache:")
        entry = CacheEntry.from_bytes(raw, key) if isinstance(raw, bytes) else None
        assert entry is not None, name
        assert 0 < client.ttl(name) <= keys.ARTIFACT_TTL_S
        found.append(entry)
    return found


@pytest.mark.slow
def test_fleet_runs_share_the_cache_through_redis_and_a_rejected_hit_goes_to_the_agent(
    redis_url: str, client: redis.Redis, example: Path, tmp_path: Path
) -> None:
    tree = example / "tree.json"
    replay = ("--replay-dir", str(example / "replay"))
    projects = [tmp_path / "first", tmp_path / "second"]
    for root in projects:
        root.mkdir()
        (root / "pact.yaml").write_text("cache: verify\nbackoff_base_s: 0.05\n")
    with Fleet(redis_url, tmp_path / "logs") as fleet:
        fleet.worker("w", roles=ALL_ROLES, concurrency=3)
        first = fleet.run(tree, projects[0], *replay, name="first")
        assert fleet.wait(first, 300) == 0, fleet.logs()

        recorded = cached_entries(client)
        state = rebuild_state(projects[0])
        assert state.status is RunStatus.COMPLETED
        assert len(recorded) == len(state.items)
        # A result the harness must reject, put in the shared cache as tokens' code.
        entry = next(
            e for e in recorded if (e.component_id, e.phase) == ("tokens", Phase.IMPLEMENT)
        )
        bad = {"src/tokens.py": b"raise ImportError('not the tokens module')\n"}
        cache = RedisActionCache(client)
        bad_output = cache.store.put_bundle(bad)
        cache.put(entry.model_copy(update={"output": bad_output}), bad)

        second = fleet.run(tree, projects[1], *replay, name="second")
        assert fleet.wait(second, 300) == 0, fleet.logs()

    state = rebuild_state(projects[1])
    assert state.status is RunStatus.COMPLETED
    events, _ = read_events(ProjectDir(projects[1]).audit_path)
    hits = [e for e in events if isinstance(e, CacheHit)]
    dropped = [e for e in events if isinstance(e, CacheDropped)]
    assert len(hits) == len(state.items) - 1
    assert [(d.component_id, d.phase, d.output) for d in dropped] == [
        ("tokens", Phase.IMPLEMENT, bad_output)
    ]
    paid = [e for e in events if isinstance(e, ItemSucceeded) and e.usage.cost_usd > 0]
    assert [(e.component_id, e.phase) for e in paid] == [("tokens", Phase.IMPLEMENT)]
    tokens = state.item("tokens", Phase.IMPLEMENT)
    assert tokens.output == entry.output and tokens.test_results is not None
    # The agent's verified answer replaced the bad entry in Redis.
    again = RedisActionCache(client).get(entry.key)
    assert again is not None and again.output == entry.output
