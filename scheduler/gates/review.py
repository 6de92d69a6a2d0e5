"""Human review (seed 004's review queue): what waits, and a human's decision.

Rules:

- an item awaits review when ``review:`` asked for it and the harness verified its
  attempt (see :mod:`scheduler.gates.handling`); :func:`pending_reviews` lists them
  with the files the attempt would promote (a unified diff against what the project
  holds now), its test results and its score;
- :func:`decide_review` logs one ``review_decided`` event (approved or rejected, by
  whom, the note) under the run's lock, and only for an item that awaits review; a
  rejection needs a note, which the next attempt receives as feedback; nothing is
  written when the input is bad;
- the run then goes on (``pact approve`` / ``reject`` resume it): an approved item is
  promoted as any verified item is, a rejected one dispatched again;
- on the fleet (``--broker``) a run a scheduler drives gets the decision through Redis
  and a run nobody drives is handed back to the scheduler services
  (:mod:`scheduler.gates.fleet`).
"""

from __future__ import annotations

import difflib
import getpass
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from pact_workers.errors import InputError
from pact_workers.models.work import ItemStatus, Phase
from scheduler.audit import AuditLog, is_driven
from scheduler.commands.rundir import check_run_dir
from scheduler.gates.events import ReviewDecided
from scheduler.gates.fleet import ReviewRequest, fleet_client, send_review_request
from scheduler.gates.reviewers import Verdict
from scheduler.launch import load_state
from scheduler.project import ProjectDir
from scheduler.state import ItemState, RunState

#: Exit code of a run that stopped because items await a human's review.
EXIT_AWAITING_REVIEW = 3
#: Largest diff shown per file (characters); ``--json`` has the same cut.
MAX_DIFF_CHARS = 20_000
#: Longest note accepted (characters).
MAX_NOTE_CHARS = 4_000


class PendingReview(BaseModel):
    """One item that awaits review, as ``pact review`` shows it."""

    model_config = ConfigDict(frozen=True)

    item: str
    attempt: int
    score: int
    tests: str
    files: list[str] = Field(default_factory=list)
    diff: str = ""


class HumanReviewer:
    """A person's decision, in the reviewers' shape."""

    def __init__(self, name: str) -> None:
        self.name = name

    def review(self, subject: tuple[bool, str]) -> Verdict:
        approved, note = subject
        return Verdict(reviewer=self.name, approved=approved, findings=[] if approved else [note])


def reviewer_name(given: str | None) -> str:
    """Who decides: ``--by`` (or ``PACT_REVIEWER``), else the login name."""
    if given is not None:
        name = given.strip()
        if not name or len(name) > 200 or any(not c.isprintable() for c in name):
            raise InputError("--by: give a printable name of at most 200 characters")
        return name
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "unknown"


def pending_reviews(*, project_dir: Path) -> tuple[RunState, list[PendingReview]]:
    """The run's state and every item that awaits review, with its diff."""
    project = ProjectDir(project_dir)
    check_run_dir(project)
    state, _ = load_state(project)
    store = project.store()
    pending: list[PendingReview] = []
    for key, item in state.items.items():
        held = item.gates.review
        if item.status is not ItemStatus.AWAITING_REVIEW or held is None:
            continue
        files = dict(store.get_bundle(held.output))
        tr = held.test_results
        pending.append(
            PendingReview(
                item=key,
                attempt=held.attempt,
                score=held.score,
                tests=f"{tr.passed}/{tr.total} passed" if tr else "no tests",
                files=sorted(files),
                diff=_diff(project, item, files),
            )
        )
    return state, pending


def find_item(state: RunState, given: str) -> ItemState:
    """The item ``given`` names (``component/phase``, or a component whose one item
    awaits review).

    Raises:
        InputError: no such item, or it does not await review (saying what does).
    """
    waiting = [i for i in state.items.values() if i.status is ItemStatus.AWAITING_REVIEW]
    listed = ", ".join(f"{i.component_id}/{i.phase.value}" for i in waiting) or "none"
    if "/" in given:
        phase = given.partition("/")[2]
        item = state.items.get(given) if phase in set(Phase) else None
        if item is None:
            raise InputError(
                f"item {given!r}: not a work item of this run (awaiting review: {listed})"
            )
    else:
        matches = [i for i in waiting if i.component_id == given]
        if not matches:
            known = state.tree is not None and given in state.tree.nodes
            what = "has no item awaiting review" if known else "is not a component of this run"
            raise InputError(f"component {given!r} {what} (awaiting review: {listed})")
        item = matches[0]
    if item.status is not ItemStatus.AWAITING_REVIEW:
        raise InputError(
            f"item {item.component_id}/{item.phase.value} is {item.status.value}, not "
            f"awaiting review (awaiting review: {listed})"
        )
    return item


def decide_review(
    *,
    project_dir: Path,
    item: str,
    approved: bool,
    note: str,
    by: str | None = None,
    broker_url: str | None = None,
) -> ReviewDecided | ReviewRequest:
    """Log a human's decision on an item awaiting review and return the event logged;
    with ``broker_url``, for a run a scheduler drives, send it there instead and return
    the request sent.

    Raises:
        InputError: the run or item is not there, the item does not await review, a
            rejection without a note, or another process drives the run (and no
            ``broker_url`` says where to send the decision).
        BrokerUnavailable: Redis cannot be reached.
    """
    note = note.strip()
    if not approved and not note:
        raise InputError("reject: --note is required; it tells the next attempt what to change")
    if len(note) > MAX_NOTE_CHARS:
        raise InputError(f"--note: at most {MAX_NOTE_CHARS} characters, got {len(note)}")
    who = reviewer_name(by)
    project = ProjectDir(project_dir)
    check_run_dir(project, writes=True)
    if is_driven(project.audit_path):
        if broker_url is None:
            raise InputError(
                f"{project_dir}: a pact process drives this run; decide once it pauses for "
                "review, or pass --broker URL when a scheduler service drives it"
            )
        state, _ = load_state(project)
        target = find_item(state, item)
        request = ReviewRequest(
            item=f"{target.component_id}/{target.phase.value}",
            approved=approved,
            by=who,
            note=note,
        )
        with fleet_client(broker_url) as client:
            send_review_request(client, state.run_id, request)
        return request
    with AuditLog(project.audit_path) as audit:
        # Read under the lock: nobody can decide the same item in between.
        state, _ = load_state(project)
        target = find_item(state, item)
        verdict = HumanReviewer(who).review((approved, note))
        held = target.gates.review
        event = audit.append(
            ReviewDecided(
                component_id=target.component_id,
                phase=target.phase,
                attempt=held.attempt if held is not None else target.attempt,
                approved=verdict.approved,
                by=verdict.reviewer,
                note=note,
            )
        )
    assert isinstance(event, ReviewDecided)
    return event


def _diff(project: ProjectDir, item: ItemState, files: dict[str, bytes]) -> str:
    """What promoting ``files`` would change in the project, as a unified diff."""
    prefix = "tests/" if item.phase is Phase.TEST else "src/"
    dest = project.destination(item.component_id, item.phase)
    chunks: list[str] = []
    for path, data in sorted(files.items()):
        if not path.startswith(prefix):
            continue
        target = dest / path.removeprefix(prefix)
        shown = target.relative_to(project.root).as_posix()
        old = target.read_bytes() if target.is_file() else b""
        try:
            before, after = old.decode("utf-8"), data.decode("utf-8")
        except UnicodeDecodeError:
            chunks.append(f"binary file {shown} differs\n")
            continue
        text = "".join(
            difflib.unified_diff(
                before.splitlines(keepends=True),
                after.splitlines(keepends=True),
                fromfile=f"a/{shown}" if old else "/dev/null",
                tofile=f"b/{shown}",
            )
        )
        if len(text) > MAX_DIFF_CHARS:
            text = text[:MAX_DIFF_CHARS] + f"\n... ({len(text) - MAX_DIFF_CHARS} more characters)\n"
        chunks.append(text)
    return "".join(chunks)
