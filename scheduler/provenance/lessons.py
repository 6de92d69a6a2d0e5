"""Lessons carried from one run to the next (6.4: "future runs can load retrospectives").

When a run ends its retrospective is written into the project
(``.pact/retrospectives/<run_id>.json``) and published to the lessons store, under a key
made from what configures the run: the effective ``pact.yaml`` settings and the agent
options (which carry the agents, models and prices of a submitted run's ``--settings``).
So a later run of the same project (a resume) and any run configured by the same
``pact.yaml`` (another project directory, or runs submitted together) find them.

The store lives beside the action cache of embedded runs: ``PACT_CACHE_DIR`` (else
``$XDG_CACHE_HOME/pact-fleet``) under ``lessons/<key>/<run_id>.json``. A run loads the
lessons once when it is opened; code authors and integrators see them in tier 2 of their
context, those naming their component first.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Mapping
from pathlib import Path

from pact_workers.files import atomic_write
from scheduler.cache.factory import default_cache_dir
from scheduler.provenance.retrospective import (
    RunRetrospective,
    read_retrospectives,
    write_retrospective,
)
from scheduler.settings import Settings

log = logging.getLogger(__name__)

#: Most lessons a run carries into its prompts (the newest runs' first).
MAX_CARRIED = 20


def lessons_key(settings: Settings, agent_options: Mapping[str, str] | None = None) -> str:
    """What identifies "the same pact.yaml": the effective settings it makes, and the
    agent options the run was started with (a submitted run's ``--settings`` reach it as
    those: its agents, models and prices), so copies of one file share a key."""
    doc = {"settings": settings.model_dump(mode="json"), "agent": dict(agent_options or {})}
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:24]


def lessons_dir(key: str) -> Path:
    return default_cache_dir() / "lessons" / key


def publish(retro: RunRetrospective, key: str) -> None:
    """Put ``retro`` in the lessons store under ``key`` (replacing the run's earlier one)."""
    data = retro.model_dump_json(indent=2).encode() + b"\n"
    atomic_write(lessons_dir(key) / f"{retro.run_id}.json", data, fsync=False)


def prior_lessons(project_dir: Path, key: str) -> list[str]:
    """The lessons of earlier runs: this project's retrospectives, then the store's
    under ``key``, newest run first, without duplicates."""
    found = [
        *read_retrospectives(lessons_dir(key)),
        *read_retrospectives(project_dir / ".pact" / "retrospectives"),
    ]
    found.sort(key=lambda r: (r.generated_at, r.run_id), reverse=True)
    lessons: dict[str, None] = {}
    for retro in found:
        for lesson in retro.lessons:
            lessons.setdefault(lesson, None)
    return list(lessons)[:MAX_CARRIED]


def retrospect(project_dir: Path, key: str) -> RunRetrospective | None:
    """At a run's end: write its retrospective and publish it. A failure here is logged,
    never raised: the run itself has ended and is on disk."""
    try:
        retro = write_retrospective(project_dir)
    except (OSError, ValueError) as exc:
        log.warning("no retrospective written for %s: %s", project_dir, exc)
        return None
    try:
        publish(retro, key)
    except OSError as exc:
        log.warning("retrospective %s not published to the lessons store: %s", retro.run_id, exc)
    return retro
