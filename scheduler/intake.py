"""How a scheduler service takes runs on: new ones from submissions, orphans by adoption.

Both happen only under the run's lease (:mod:`scheduler.ownership`): the service that
holds it creates the run directory if it does not exist yet, then opens the run with
a controller whose audit log checks the lease before every write. Each loop a service
takes at most :func:`room_for_runs` runs: up to ``--max-runs`` in all, at most
:data:`TAKE_PER_STEP` at once, and only one more than the least loaded other live
service has, so that runs spread evenly (one per loop at least: a service never waits
for a slower one). Orphans come first: they are runs under way.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable, Container, Mapping
from pathlib import Path

import redis

from pact_workers.artifacts import ArtifactStore, DirectoryBlobStore
from pact_workers.errors import PactError, RunDirError
from pact_workers.fleet.blobs import RedisBlobStore
from pact_workers.fleet.tiered import TieredBlobStore
from pact_workers.models.tree import load_tree
from scheduler.audit import is_driven
from scheduler.cache import RedisActionCache
from scheduler.executors.celery import CeleryFleet
from scheduler.executors.celery_executor import CeleryExecutor
from scheduler.journal import Listener
from scheduler.launch import start_run
from scheduler.ownership import LeaseLost, RunLeases
from scheduler.project import ProjectDir
from scheduler.registry import Submission, SubmissionQueue, get_run, update_run
from scheduler.run import RunController
from scheduler.settings import load_settings

__all__ = ["TAKE_PER_STEP", "Intake", "create_run", "open_run", "room_for_runs"]

log = logging.getLogger(__name__)

#: Runs a service takes on (new or adopted) in one loop at most, so that a backlog
#: never holds up the renewal of the leases it already has.
TAKE_PER_STEP = 8


def room_for_runs(active: int, max_runs: int, others: Mapping[str, int]) -> int:
    """How many runs a service driving ``active`` takes on in this loop; ``others``:
    the runs each other live service drives."""
    free = max_runs - active
    if free <= 0:
        return 0
    if others:
        return min(free, TAKE_PER_STEP, max(1, min(others.values()) + 1 - active))
    return min(free, TAKE_PER_STEP)


class Intake:
    """Takes runs on for one service; ``open_run(run_id, token)`` opens a run whose
    lease it holds and starts driving it (raising a PactError when it cannot)."""

    def __init__(
        self,
        *,
        client: redis.Redis,
        leases: RunLeases,
        submissions: SubmissionQueue,
        runs_dir: Path,
        retry_after_s: float,
        scan_every_s: float,
        clock: Callable[[], float],
        open_run: Callable[[str, int], None],
    ) -> None:
        self.client = client
        self.leases = leases
        self.submissions = submissions
        self.runs_dir = runs_dir
        self.retry_after_s = retry_after_s
        self.scan_every_s = scan_every_s
        self.clock = clock
        self.open_run = open_run
        #: Runs this service could not open, left to others until then.
        self._unopenable: dict[str, float] = {}
        self._scanned_at = float("-inf")

    def adopt_orphans(self, room: int, active: Container[str]) -> int:
        """Take up to ``room`` active runs whose lease nobody holds; returns how many.
        Looks for them every ``scan_every_s`` at most (a busy loop turns often)."""
        now = self.clock()
        if room <= 0 or now - self._scanned_at < self.scan_every_s:
            return 0
        self._scanned_at = now
        orphans = [
            r
            for r in self.leases.orphans()
            if r not in active and self._unopenable.get(r, 0.0) <= now
        ]
        random.shuffle(orphans)  # services looking at once start on different runs
        taken = 0
        for run_id in orphans:
            if taken >= room:
                break
            if is_driven(ProjectDir(self.runs_dir / run_id).audit_path):
                continue  # a process on this machine still has it open: wait for it
            token = self.leases.acquire(run_id)
            if token is None:
                continue  # another service was quicker
            try:
                self.open_run(run_id, token)
            except PactError as exc:
                log.error("cannot adopt run %s: %s", run_id, exc)
                self._unopenable[run_id] = now + self.retry_after_s
                self.leases.release(run_id, token)
                continue
            log.info("run %s adopted (lease token %d)", run_id, token)
            taken += 1
        return taken

    def take_submissions(self, room: int) -> None:
        """Create and open up to ``room`` submitted runs."""
        for entry_id, sub in self.submissions.take(room):
            if sub is None:
                self.submissions.ack(entry_id)  # malformed: logged, never retried
            else:
                self._start(entry_id, sub)

    def _start(self, entry_id: bytes, sub: Submission) -> None:
        entry = get_run(self.client, sub.run_id)
        if entry is not None and entry.state != "queued":
            # Created already by a service that died before acknowledging the entry:
            # the run is adopted like any other.
            self.submissions.ack(entry_id)
            return
        token = self.leases.acquire(sub.run_id)
        if token is None:
            return  # another service is creating it; that one acknowledges the entry
        project = ProjectDir(self.runs_dir / sub.run_id)
        try:
            create_run(project, sub, fence=lambda: self.leases.check(sub.run_id, token))
        except LeaseLost as exc:
            # This service stalled while it created the run, and another took it over
            # (the submission is that one's to acknowledge).
            log.warning("run %s given up while being created: %s", sub.run_id, exc)
            return
        except PactError as exc:
            log.error("run %s (%s) rejected: %s", sub.run_id, sub.name, exc)
            update_run(self.client, sub.run_id, state="rejected", reason=str(exc))
            self.leases.release(sub.run_id, token)
            self.submissions.ack(entry_id)
            return
        update_run(
            self.client,
            sub.run_id,
            state="active",
            project_dir=str(project.root),
            name=sub.name,
            priority=sub.priority,
            submitted_at=sub.submitted_at,
        )
        self.submissions.ack(entry_id)
        try:
            self.open_run(sub.run_id, token)
        except PactError as exc:
            # The run exists and is active: whoever can open it adopts it.
            log.error("run %s created but not opened here: %s", sub.run_id, exc)
            self.leases.release(sub.run_id, token)


def create_run(
    project: ProjectDir, sub: Submission, *, fence: Callable[[], None] | None = None
) -> None:
    """Create the run of ``sub`` in ``project`` unless a service already did (and died
    before it could say so); ``fence`` as for :func:`start_run`. An empty log is no run:
    one written before logs were created whole, by a service killed between creating
    the file and writing its first line (nothing was acted on), is made again."""
    if project.has_run():
        if project.audit_path.stat().st_size > 0:
            return
        project.audit_path.unlink()
    project.root.mkdir(parents=True, exist_ok=True)
    tree_path = project.root / f"tree{sub.tree_suffix}"
    tree_path.write_text(sub.tree_text, encoding="utf-8")
    start_run(
        project,
        load_tree(tree_path),
        tree_bytes=sub.tree_text.encode(),
        settings=load_settings(project.settings_path),
        agent=sub.agent,
        agent_options=sub.agent_options,
        sandbox=sub.sandbox,
        run_id=sub.run_id,
        fence=fence,
    )


def open_run(
    project: ProjectDir,
    run_id: str,
    *,
    fleet: CeleryFleet,
    client: redis.Redis,
    clock: Callable[[], float],
    listener: Listener | None,
    fence: Callable[[], None],
) -> RunController:
    """Open the run in ``project`` over ``fleet`` (its result stream attached, its
    attempts in flight adopted); ``fence`` is checked before every write to its log.

    Raises:
        RunDirError: no run there, or another process on this machine drives it.
    """
    if not project.has_run():
        raise RunDirError(f"{project.root}: no run here")
    settings = load_settings(project.settings_path)
    store = ArtifactStore(
        TieredBlobStore(
            DirectoryBlobStore(project.artifacts_dir, deferred=True),
            RedisBlobStore(client),
            deferred=True,
        )
    )
    controller = RunController(
        project,
        executor=CeleryExecutor(fleet, run_id, capacity=10_000),
        store=store,
        settings=settings,
        clock=clock,
        listener=listener,
        fence=fence,
        cache=RedisActionCache(client),
    )
    try:
        controller.open()
    except BaseException:
        fleet.forget_run(run_id)
        raise
    return controller
