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

The store keeps only what is carried (each run's lessons, with its id and time, not its
whole retrospective, which for a large tree is megabytes), and only the newest
:data:`KEPT_RUNS` runs per key: every run opens it, so it must not grow with every run
ever made.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
from collections.abc import Mapping
from pathlib import Path

from pact_workers.files import atomic_write
from scheduler.cache.factory import default_cache_dir
from scheduler.provenance.retrospective import RunRetrospective, write_retrospective
from scheduler.settings import Settings

log = logging.getLogger(__name__)

#: Most lessons a run carries into its prompts (the newest runs' first).
MAX_CARRIED = 20
#: Runs whose lessons the store keeps per key (older ones are removed on publishing).
KEPT_RUNS = 20


def lessons_key(settings: Settings, agent_options: Mapping[str, str] | None = None) -> str:
    """What identifies "the same pact.yaml": the effective settings it makes, and the
    agent options the run was started with (a submitted run's ``--settings`` reach it as
    those: its agents, models and prices), so copies of one file share a key."""
    doc = {"settings": settings.model_dump(mode="json"), "agent": dict(agent_options or {})}
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:24]


def lessons_dir(key: str) -> Path:
    return default_cache_dir() / "lessons" / key


def publish(retro: RunRetrospective, key: str) -> None:
    """Put ``retro``'s lessons in the lessons store under ``key`` (replacing the run's
    earlier ones), and forget the oldest runs beyond :data:`KEPT_RUNS`."""
    directory = lessons_dir(key)
    record = {"run_id": retro.run_id, "generated_at": retro.generated_at, "lessons": retro.lessons}
    atomic_write(directory / f"{retro.run_id}.json", json.dumps(record).encode(), fsync=False)
    try:
        kept = sorted(
            (e for e in os.scandir(directory) if e.name.endswith(".json")),
            key=lambda e: e.stat().st_mtime_ns,
            reverse=True,
        )
    except OSError:
        return
    for entry in kept[KEPT_RUNS:]:
        with contextlib.suppress(OSError):
            os.unlink(entry.path)


def prior_lessons(project_dir: Path, key: str) -> list[str]:
    """The lessons of earlier runs: this project's retrospectives, then the store's
    under ``key``, newest run first, without duplicates."""
    found = [
        *_read_lessons(lessons_dir(key)),
        *_read_lessons(project_dir / ".pact" / "retrospectives"),
    ]
    found.sort(key=lambda r: (r[0], r[1]), reverse=True)
    lessons: dict[str, None] = {}
    for _, _, carried in found:
        for lesson in carried:
            lessons.setdefault(lesson, None)
    return list(lessons)[:MAX_CARRIED]


def _read_lessons(directory: Path) -> list[tuple[str, str, list[str]]]:
    """(generated_at, run_id, lessons) of every readable record in ``directory``: the
    store's records, or whole retrospectives (a project's own; older stores held those
    too); anything else is skipped."""
    found: list[tuple[str, str, list[str]]] = []
    try:
        paths = [e.path for e in os.scandir(directory) if e.name.endswith(".json")]
    except OSError:
        return found
    for path in paths:
        try:
            with open(path, "rb") as fh:
                doc = json.loads(fh.read())
        except (OSError, ValueError):
            continue
        if not isinstance(doc, dict):
            continue
        run_id, at, carried = doc.get("run_id"), doc.get("generated_at", ""), doc.get("lessons")
        if not isinstance(run_id, str) or not isinstance(at, str) or not isinstance(carried, list):
            continue
        found.append((at, run_id, [x for x in carried if isinstance(x, str)]))
    return found


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
