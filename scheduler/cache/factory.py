"""Building the action cache a run uses: from a URL, or from where the run runs.

Embedded runs (``pact run``, the local executor) share a directory on the machine:
``PACT_CACHE_DIR``, else ``$XDG_CACHE_HOME/pact-fleet``, else ``~/.cache/pact-fleet``.
Fleet runs (the Celery executor, the scheduler service) share the fleet's Redis.
Backends are imported when they are built.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from pact_workers.errors import InputError
from pact_workers.files import probe_directory
from scheduler.cache.base import ActionCache, CacheError, CacheMode, effective_mode

if TYPE_CHECKING:
    import redis

__all__ = [
    "CACHE_DIR_ENV",
    "check_cache_dir",
    "check_cache_env",
    "default_cache_dir",
    "embedded_cache",
    "from_config",
    "from_url",
]

#: The variable that names the cache directory of embedded runs.
CACHE_DIR_ENV = "PACT_CACHE_DIR"


def default_cache_dir(environ: Mapping[str, str] | None = None) -> Path:
    """``PACT_CACHE_DIR``, else ``$XDG_CACHE_HOME/pact-fleet``, else
    ``~/.cache/pact-fleet`` (read now, never at import)."""
    env = os.environ if environ is None else environ
    if env.get(CACHE_DIR_ENV):
        return Path(env[CACHE_DIR_ENV]).expanduser()
    base = env.get("XDG_CACHE_HOME") or ""
    root = Path(base).expanduser() if Path(base).expanduser().is_absolute() else None
    return (root or Path.home() / ".cache") / "pact-fleet"


def check_cache_dir(path: Path) -> str | None:
    """Why ``path`` cannot hold the cache (None: it can, or can be created)."""
    probe = path
    while not probe.exists() and not probe.is_symlink():
        if probe.parent == probe:
            return "no part of it exists"
        probe = probe.parent
    if not probe.is_dir():
        what = "is" if probe == path else f"is under {probe}, which is"
        return f"{what} not a directory"
    if not os.access(probe, os.W_OK | os.X_OK):
        return f"{probe} is not writable by this user"
    try:
        probe_directory(probe)
    except OSError as exc:
        return f"no file can be made in {probe} ({exc.strerror or exc})"
    return None


def check_cache_env(environ: Mapping[str, str] | None = None) -> None:
    """Refuse a ``PACT_CACHE_DIR`` that cannot hold what goes there, whatever the run's
    cache mode: the lessons store lives there too, and every run publishes its
    retrospective's lessons when it ends (an unset variable is never refused: the
    default directory, when unusable, only costs the cache and the lessons).

    Raises:
        InputError: the variable names a directory that cannot be written.
    """
    env = os.environ if environ is None else environ
    if not env.get(CACHE_DIR_ENV):
        return
    root = default_cache_dir(env)
    problem = check_cache_dir(root)
    if problem is not None:
        raise InputError(
            f"{CACHE_DIR_ENV}={root}: {problem}; it holds the action cache and the lessons "
            "runs carry to the next: set it to a directory you can write, or unset it"
        )


def from_url(url: str) -> ActionCache:
    """The cache a URL names: ``redis://``, ``rediss://`` or ``unix://`` (the fleet's
    Redis), ``file:///path`` or a plain path (a directory).

    Raises:
        CacheError: a directory that cannot hold the cache.
        SettingsError: a malformed Redis URL.
    """
    if url.split("://", 1)[0] in ("redis", "rediss", "unix"):
        from pact_workers.fleet.connection import check_redis_url, redis_from_url

        return from_config(client=redis_from_url(check_redis_url(url)))
    return from_config(directory=Path(url.removeprefix("file://")))


def from_config(
    *,
    client: redis.Redis | None = None,
    directory: Path | None = None,
    environ: Mapping[str, str] | None = None,
) -> ActionCache:
    """The fleet's cache when a Redis ``client`` is given, else the directory cache in
    ``directory`` (default :func:`default_cache_dir`).

    Raises:
        CacheError: the directory cannot hold the cache; the message names it and,
            when it came from ``PACT_CACHE_DIR``, the variable.
    """
    if client is not None:
        from scheduler.cache.redis import RedisActionCache

        return RedisActionCache(client)
    from scheduler.cache.directory import DirectoryActionCache

    env = os.environ if environ is None else environ
    root = directory if directory is not None else default_cache_dir(env)
    problem = check_cache_dir(root)
    if problem is not None:
        named = f"{CACHE_DIR_ENV}={root}" if directory is None and env.get(CACHE_DIR_ENV) else root
        raise CacheError(
            f"action cache directory {named}: {problem}; set {CACHE_DIR_ENV} to a "
            "directory you can write, or set cache: off in pact.yaml"
        )
    return DirectoryActionCache(root)


def embedded_cache(
    setting: CacheMode | None,
    agent_name: str,
    executor_name: str,
    warnings: list[str],
    *,
    environ: Mapping[str, str] | None = None,
) -> ActionCache | None:
    """The directory cache of a run on this machine (``executor_name`` ``local``), or
    None: the run uses no cache (``setting`` and ``agent_name`` say, see
    :func:`~scheduler.cache.base.effective_mode`) or runs on the fleet (whose cache is
    in Redis). Checked before anything is written: an unusable default directory is a
    warning appended to ``warnings`` (the run goes without the cache), an unusable
    ``PACT_CACHE_DIR`` an error.

    Raises:
        InputError: ``PACT_CACHE_DIR`` names a directory that cannot hold the cache
            (refused whatever the mode and executor: see :func:`check_cache_env`).
    """
    env = os.environ if environ is None else environ
    check_cache_env(env)
    if executor_name != "local" or effective_mode(setting, agent_name) is CacheMode.OFF:
        return None
    try:
        return from_config(environ=env)
    except CacheError as exc:  # the default directory: PACT_CACHE_DIR was checked above
        warnings.append(f"running without the action cache: {exc}")
        return None
