"""The action cache (as Bazel's): a work item identical to one already done is served
its verified result instead of an agent call.

The rules, in words:

- **The key.** Every work item has an action key: the digest of everything that
  decides its result (``key.py`` says what, why, and what is left out on purpose):
  the component as the tree gives it, the phase and role, the agent that serves the
  role (backend, model, server; the replay agent's directory content; never a key),
  the role's prompt, the environment and sandbox image, and the digests of every input
  the agent and the harness see. Anything upstream that differed gives another key.
- **Only verified results are cached.** An entry is written for a result the harness
  accepted (and, for a contract, the run's contract checks too), and only once the
  run's log holds its ``item_succeeded`` on disk. A hit is never recorded again.
- **A hit.** With ``cache: verify`` (the default), a hit skips the agent: the worker
  runs the harness on the cached result exactly as it would on an agent's answer (the
  contract checks, the test-suite checks, the contract tests in the sandbox), and the
  run checks a contract as it checks every contract. Accepted, the item succeeds at
  cost 0 and the hit is logged (``cache_hit``: the cost and time it saved, the run it
  came from). Rejected (or its files gone), the hit is dropped (``cache_dropped``) and
  the agent is asked, in the same attempt when the worker rejected it, in the next one
  when the run's contract checks did; the cache is not asked again for that item in
  that run. With ``cache: trust`` the harness does not verify a hit again. With
  ``cache: off`` the cache is neither read nor written.
- **Agents that cost nothing** (replay, noop) use the cache only when pact.yaml sets
  ``cache:``: their runs test and measure the pipeline itself, and a replay script's
  per-attempt behaviour (a failure, a retry) would be skipped by a hit.
- **Where.** Embedded runs on one machine share a directory (``PACT_CACHE_DIR``, else
  ``$XDG_CACHE_HOME/pact-fleet``, else ``~/.cache/pact-fleet``); fleet runs share the
  fleet's Redis (``pact:cache:<key>``, see :mod:`pact_workers.fleet.keys`). Both are
  an :class:`ActionCache`: ``get``, ``put``, ``files``.
- **Never in the way.** A cache that cannot be read is a miss; one that cannot be
  written is left as it was; both are logged and the run goes on.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from scheduler.cache.base import FREE_AGENTS, ActionCache, CacheError, CacheMode, effective_mode
from scheduler.cache.directory import DirectoryActionCache
from scheduler.cache.entry import CacheEntry
from scheduler.cache.factory import (
    CACHE_DIR_ENV,
    check_cache_dir,
    check_cache_env,
    default_cache_dir,
    embedded_cache,
    from_config,
    from_url,
)
from scheduler.cache.key import KeyBasis, action_key, key_basis, key_document
from scheduler.cache.runs import CacheReport, RunCache, cache_report

__all__ = [
    "CACHE_DIR_ENV",
    "FREE_AGENTS",
    "ActionCache",
    "CacheEntry",
    "CacheError",
    "CacheMode",
    "CacheReport",
    "DirectoryActionCache",
    "KeyBasis",
    "RedisActionCache",
    "RunCache",
    "action_key",
    "cache_report",
    "check_cache_dir",
    "check_cache_env",
    "default_cache_dir",
    "effective_mode",
    "embedded_cache",
    "from_config",
    "from_url",
    "key_basis",
    "key_document",
]

if TYPE_CHECKING:
    from scheduler.cache.redis import RedisActionCache


def __getattr__(name: str) -> Any:
    # The Redis backend imports redis-py: only when a fleet run asks for it, so that
    # every other command starts without it.
    if name == "RedisActionCache":
        from scheduler.cache.redis import RedisActionCache

        return RedisActionCache
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
