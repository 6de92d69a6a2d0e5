"""The run registry and the submission queue, in Redis (``pact:runs``, ``pact:submissions``).

``pact submit`` validates each tree on the submitting machine and queues it; a
scheduler service creates the run when it gets to it. A service that is down
loses nothing: submissions wait in the stream until a service reads and
acknowledges them. Each scheduler reads the stream as a consumer of its own in
the group ``service``; an entry a scheduler read and never acknowledged (it died)
is claimed by another once it has been idle for a lease TTL.

Registry entries are merged field by field in Redis (one script), so that two
schedulers updating one run, or one run's entry and the active-run set, never
overwrite each other's fields.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import redis
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from pact_workers.errors import InputError
from pact_workers.fleet import keys
from pact_workers.fleet.wire import discard, ensure_group, is_wrong_type, read_or_discard
from pact_workers.models.documents import validation_problems
from pact_workers.models.tree import load_tree
from pact_workers.models.work import cut_text
from scheduler.launch import new_run_id

log = logging.getLogger(__name__)

RunState = Literal["queued", "active", "paused", "completed", "failed", "rejected"]

#: How a submitted tree is parsed again (as a tree file of that suffix).
TreeSuffix = Literal[".json", ".yaml", ".yml"]
#: The longest tree name a submission may carry (it is a file name, shown by ``pact runs``).
MAX_NAME_CHARS = 255
#: The longest project directory a registry entry may name (Linux's PATH_MAX).
MAX_PATH_CHARS = 4096


class Submission(BaseModel):
    """One tree waiting for the scheduler service."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    #: Names the run's directory under the runs directory: checked, as each field is,
    #: when the entry is read (anyone who can write to Redis can write one).
    run_id: str = Field(pattern=keys.RUN_ID_PATTERN)
    name: str = Field(max_length=MAX_NAME_CHARS)
    tree_text: str
    tree_suffix: TreeSuffix = ".json"
    priority: int = Field(default=0, ge=0, le=keys.MAX_PRIORITY)
    agent: str = "replay"
    agent_options: dict[str, str] = Field(default_factory=dict)
    sandbox: Literal["local", "docker"] = "local"
    submitted_at: str


class RunEntry(BaseModel):
    """What ``pact runs`` shows for one run. Read from Redis, so checked as a submission
    is: names and paths bounded (an entry with a longer one is no entry), the reason
    cut as a result's texts are."""

    model_config = ConfigDict(extra="ignore")

    run_id: str = Field(max_length=MAX_NAME_CHARS)
    name: str = Field(max_length=MAX_NAME_CHARS)
    state: RunState
    #: Turns per round less one (see :mod:`scheduler.fairness`): 0..9, as submitted.
    priority: int = Field(default=0, ge=0, le=keys.MAX_PRIORITY)
    submitted_at: str = Field(default="", max_length=MAX_NAME_CHARS)
    project_dir: str = Field(default="", max_length=MAX_PATH_CHARS)
    items_done: int = 0
    items_total: int = 0
    cost_usd: float = 0.0
    reason: str = ""
    #: The scheduler that owns the run (while active: the holder of its lease, empty
    #: when the lease expired and no other scheduler took the run yet), else the last.
    owner: str = Field(default="", max_length=MAX_NAME_CHARS)
    #: When (epoch seconds) the owner opened the run, and the fencing token it holds.
    owner_since: float = 0.0
    lease_token: int = 0

    @field_validator("reason", mode="before")
    @classmethod
    def _cut(cls, text: object) -> object:
        return cut_text(text)


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
    if not 0 <= priority <= keys.MAX_PRIORITY:
        raise InputError(f"--priority must be between 0 and {keys.MAX_PRIORITY}, got {priority}")


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
            tree_suffix=_tree_suffix(path),
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


def _tree_suffix(path: Path) -> TreeSuffix:
    """How the service parses the tree again: as YAML, or else as JSON (as load_tree)."""
    suffix = path.suffix.lower()
    if suffix == ".yaml":
        return ".yaml"
    return ".yml" if suffix == ".yml" else ".json"


#: What the registry holds, for the error that names a key of another type by its name
#: (such a key holds no entry: it is deleted, and each run's next update writes it).
_REGISTRY = "run id -> the run's registry entry"


def list_runs(client: redis.Redis) -> list[RunEntry]:
    found = read_or_discard(
        client, keys.RUNS, lambda: client.hgetall(keys.RUNS), expected="hash", what=_REGISTRY
    )
    entries = []
    for run_id, raw in (found or {}).items():
        try:
            entries.append(RunEntry.model_validate_json(raw))
        except ValidationError as exc:
            name = run_id.decode(errors="replace") if isinstance(run_id, bytes) else run_id
            log.warning(
                "%s entry %r is no run entry (%s); not shown",
                keys.RUNS,
                name[:MAX_NAME_CHARS],
                validation_problems(exc, "entry"),
            )
    return sorted(entries, key=lambda e: (e.submitted_at, e.run_id))


def update_run(client: redis.Redis, run_id: str, **fields: Any) -> None:
    """Merge ``fields`` into the registry entry of ``run_id`` (created if missing), and
    keep :data:`keys.ACTIVE_RUNS` in step with its ``state``; atomically."""
    script = client.register_script(_MERGE)  # no round trip: EVALSHA, loaded if need be
    args = [run_id, json.dumps(fields)]
    try:
        script(keys=[keys.RUNS, keys.ACTIVE_RUNS], args=args)
    except redis.ResponseError as exc:
        if not is_wrong_type(exc):
            raise
        discard(client, keys.RUNS, expected="hash", what=_REGISTRY)
        discard(client, keys.ACTIVE_RUNS, expected="set", what="the ids of the active runs")
        script(keys=[keys.RUNS, keys.ACTIVE_RUNS], args=args)


def get_run(client: redis.Redis, run_id: str) -> RunEntry | None:
    raw = read_or_discard(
        client,
        keys.RUNS,
        lambda: client.hget(keys.RUNS, run_id),
        expected="hash",
        what=_REGISTRY,
    )
    if raw is None:
        return None
    try:
        return RunEntry.model_validate_json(raw)
    except ValidationError:
        return None


def index_active_runs(client: redis.Redis) -> int:
    """Add every run the registry says is active to :data:`keys.ACTIVE_RUNS` (entries
    written before the set existed); returns how many were missing."""
    active = [e.run_id for e in list_runs(client) if e.state == "active"]
    return int(client.sadd(keys.ACTIVE_RUNS, *active)) if active else 0


_MERGE = """
        local raw = redis.call('HGET', KEYS[1], ARGV[1])
        local doc = {run_id = ARGV[1], name = ARGV[1]}
        if raw then
            local ok, old = pcall(cjson.decode, raw)
            if ok and type(old) == 'table' then doc = old end
        end
        for k, v in pairs(cjson.decode(ARGV[2])) do
            doc[k] = v
        end
        redis.call('HSET', KEYS[1], ARGV[1], cjson.encode(doc))
        if doc.state == 'active' then
            redis.call('SADD', KEYS[2], ARGV[1])
        else
            redis.call('SREM', KEYS[2], ARGV[1])
        end
        return 1
"""


class SubmissionQueue:
    """One scheduler's reader of ``pact:submissions`` (a consumer named after it).

    :meth:`take` returns entries this scheduler has not handled yet: entries idle for
    ``claim_idle_s`` with any consumer (one that died), then new ones. The caller
    acknowledges each with :meth:`ack` once the run exists (or was rejected).
    """

    def __init__(self, client: redis.Redis, consumer: str, *, claim_idle_s: float) -> None:
        self.client = client
        self.consumer = consumer
        self.claim_idle_ms = max(1, round(claim_idle_s * 1000))
        self._ensure_group()

    def _ensure_group(self) -> None:
        # A key of another type by the stream's name holds no submissions: it is
        # deleted (and said so), or every read would fail with WRONGTYPE for ever.
        ensure_group(self.client, keys.SUBMISSIONS, keys.SUBMISSIONS_GROUP, what="submissions")

    def take(self, count: int) -> list[tuple[bytes, Submission | None]]:
        """Up to ``count`` entries: (entry id, submission or None when malformed)."""
        if count <= 0:
            return []
        try:
            return self._take(count)
        except redis.ResponseError as exc:
            # Not a stream (deleted and written as another type), or the group gone
            # with a Redis restarted without persistence: both made again.
            if not (is_wrong_type(exc) or str(exc).startswith("NOGROUP")):
                raise
            self._ensure_group()
            return []  # read at the next turn

    def _take(self, count: int) -> list[tuple[bytes, Submission | None]]:
        reply: Any = self.client.xautoclaim(
            keys.SUBMISSIONS,
            keys.SUBMISSIONS_GROUP,
            self.consumer,
            min_idle_time=self.claim_idle_ms,
            start_id="0-0",
            count=count,
        )
        entries = list(reply[1])
        for entry_id in reply[2] if len(reply) > 2 else []:
            log.error(
                "submission %s was trimmed from the stream before a service took it", entry_id
            )
        if len(entries) < count:
            fresh: Any = self.client.xreadgroup(
                keys.SUBMISSIONS_GROUP,
                self.consumer,
                {keys.SUBMISSIONS: ">"},
                count=count - len(entries),
            )
            for _, found in fresh or []:
                entries += list(found)
        return [(entry_id, _submission(entry_id, fields)) for entry_id, fields in entries]

    def ack(self, entry_id: bytes) -> None:
        self.client.xack(keys.SUBMISSIONS, keys.SUBMISSIONS_GROUP, entry_id)

    def leave(self) -> None:
        """Remove this consumer from the group if nothing is pending with it."""
        self.forget_consumers(lambda name, idle_ms: name == self.consumer)

    def forget_idle_consumers(self, idle_s: float) -> None:
        """Remove consumers idle for ``idle_s`` with nothing pending (schedulers that
        died; what they had pending was claimed by others)."""
        self.forget_consumers(lambda name, idle_ms: idle_ms >= idle_s * 1000)

    def forget_consumers(self, which: Callable[[str, int], bool]) -> None:
        consumers: Any = self.client.xinfo_consumers(keys.SUBMISSIONS, keys.SUBMISSIONS_GROUP)
        for info in consumers:
            raw = info.get("name")
            name = raw.decode() if isinstance(raw, bytes) else str(raw)
            if not int(info.get("pending", 0)) and which(name, int(info.get("idle", 0))):
                self.client.xgroup_delconsumer(keys.SUBMISSIONS, keys.SUBMISSIONS_GROUP, name)


def _submission(entry_id: bytes, fields: dict[bytes, bytes] | None) -> Submission | None:
    """The submission an entry holds; None, with the reason logged, when it holds none."""
    raw = (fields or {}).get(b"submission")
    try:
        if raw is None:
            raise ValueError("no 'submission' field")
        return Submission.model_validate_json(raw)
    except ValidationError as exc:
        why = validation_problems(exc, "submission", limit=3)
    except ValueError as exc:
        why = str(exc)
    log.error(
        "%s entry %s dropped, not a submission: %s",
        keys.SUBMISSIONS,
        entry_id.decode(errors="replace"),
        why[:500],
    )
    return None
