"""The run registry and the submission queue, in Redis (``pact:runs``, ``pact:submissions``).

``pact submit`` validates each tree on the submitting machine and queues it; the
scheduler service creates the run when it gets to it. A service that is down
loses nothing: submissions wait in the stream until a service reads and
acknowledges them.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import redis
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from pact_workers.errors import InputError
from pact_workers.fleet import keys
from pact_workers.models.tree import load_tree
from scheduler.launch import new_run_id

RunState = Literal["queued", "active", "paused", "completed", "failed", "rejected"]


class Submission(BaseModel):
    """One tree waiting for the scheduler service."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    run_id: str
    name: str
    tree_text: str
    tree_suffix: str = ".json"
    priority: int = Field(default=0, ge=0, le=9)
    agent: str = "replay"
    agent_options: dict[str, str] = Field(default_factory=dict)
    sandbox: Literal["local", "docker"] = "local"
    submitted_at: str


class RunEntry(BaseModel):
    """What ``pact runs`` shows for one run."""

    model_config = ConfigDict(extra="ignore")

    run_id: str
    name: str
    state: RunState
    priority: int = 0
    submitted_at: str = ""
    project_dir: str = ""
    items_done: int = 0
    items_total: int = 0
    cost_usd: float = 0.0
    reason: str = ""


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def read_submissions(trees: list[Path]) -> tuple[list[tuple[Path, str]], list[str]]:
    """Validate each tree file; returns (path, text) of the valid ones and one error per
    rejected one (a malformed tree does not stop the others)."""
    valid: list[tuple[Path, str]] = []
    errors: list[str] = []
    for path in trees:
        try:
            load_tree(path)
            text = path.read_text(encoding="utf-8")
        except InputError as exc:
            errors.append(str(exc))
            continue
        valid.append((path, text))
    return valid, errors


def submit_trees(
    client: redis.Redis,
    trees: list[Path],
    *,
    priority: int = 0,
    agent: str = "replay",
    agent_options: dict[str, str] | None = None,
    sandbox: Literal["local", "docker"] = "local",
) -> tuple[list[RunEntry], list[str]]:
    """Validate and queue each tree; returns the queued runs and one error per rejected tree.

    A malformed tree is rejected with its message and does not stop the others.
    """
    check_priority(priority)
    valid, errors = read_submissions(trees)
    return queue_submissions(
        client,
        valid,
        priority=priority,
        agent=agent,
        agent_options=agent_options,
        sandbox=sandbox,
    ), errors


def check_priority(priority: int) -> None:
    if not 0 <= priority <= 9:
        raise InputError(f"--priority must be between 0 and 9, got {priority}")


def queue_submissions(
    client: redis.Redis,
    valid: list[tuple[Path, str]],
    *,
    priority: int = 0,
    agent: str = "replay",
    agent_options: dict[str, str] | None = None,
    sandbox: Literal["local", "docker"] = "local",
) -> list[RunEntry]:
    """Queue trees already validated by :func:`read_submissions`."""
    queued: list[RunEntry] = []
    for path, text in valid:
        sub = Submission(
            run_id=new_run_id(),
            name=path.name,
            tree_text=text,
            tree_suffix=path.suffix.lower() or ".json",
            priority=priority,
            agent=agent,
            agent_options=dict(agent_options or {}),
            sandbox=sandbox,
            submitted_at=now_iso(),
        )
        entry = RunEntry(
            run_id=sub.run_id,
            name=sub.name,
            state="queued",
            priority=priority,
            submitted_at=sub.submitted_at,
        )
        pipe = client.pipeline(transaction=True)
        pipe.hset(keys.RUNS, sub.run_id, entry.model_dump_json())
        pipe.xadd(
            keys.SUBMISSIONS,
            {"submission": sub.model_dump_json()},
            maxlen=keys.SUBMISSIONS_MAXLEN,
            approximate=True,
        )
        pipe.execute()
        queued.append(entry)
    return queued


def list_runs(client: redis.Redis) -> list[RunEntry]:
    entries = []
    for raw in client.hgetall(keys.RUNS).values():
        try:
            entries.append(RunEntry.model_validate_json(raw))
        except ValidationError:
            continue
    return sorted(entries, key=lambda e: (e.submitted_at, e.run_id))


def update_run(client: redis.Redis, run_id: str, **fields: Any) -> None:
    raw = client.hget(keys.RUNS, run_id)
    doc: dict[str, Any] = json.loads(raw) if raw else {"run_id": run_id, "name": run_id}
    doc.update(fields)
    client.hset(keys.RUNS, run_id, json.dumps(doc))
