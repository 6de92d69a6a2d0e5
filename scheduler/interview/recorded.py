"""The interview in a run's log: found beside the tree a run starts from, logged once.

``pact plan`` writes ``decomposition/interview.json`` beside the tree; ``pact run`` on
that tree (and ``pact import`` of a Pact project that holds one) logs it as
:class:`InterviewRecorded` right after ``run_started``: the document itself goes to
the run's artifact store (the contract authors are shown it), the answers in use with
their source and confidence into the event (``pact status`` warns about the unsure
ones). The event imports nothing of :mod:`scheduler.events`, which puts it into its
union, so it repeats the fields every event has.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from pact_workers.errors import InputError
from pact_workers.models.documents import read_json_input, validation_problems
from pact_workers.models.work import Usage
from scheduler.interview.answers import AnswerLog, AuditedAnswer
from scheduler.interview.document import InterviewDocument

if TYPE_CHECKING:
    from scheduler.project import ProjectDir

__all__ = [
    "INTERVIEW_FILE",
    "INTERVIEW_INPUT",
    "FoundInterview",
    "InterviewRecorded",
    "find_interview",
    "record_interview",
]

INTERVIEW_FILE = "interview.json"
#: The name of the interview's bundle among a contract author's inputs.
INTERVIEW_INPUT = "interview"
#: The spend phase each planning role's cost is counted under.
PLANNING_PHASES = {"interviewer": "interview", "decomposer": "decompose"}
MAX_INTERVIEW_BYTES = 4 * 1024 * 1024


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


class InterviewRecorded(BaseModel):
    """The run's interview: its document (by digest) and the answers in use."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    type: Literal["interview_recorded"] = "interview_recorded"
    seq: int = 0
    ts: str = Field(default_factory=_now)
    #: Digest of the bundle ``{"interview.json": ...}`` in the run's artifact store.
    output: str
    #: The file it was read from.
    source: str = ""
    questions: int = 0
    answers: list[AuditedAnswer] = Field(default_factory=list)
    #: What planning cost, by role: the run counts it as the spend of the phases
    #: ``interview`` and ``decompose`` (seed 000, 4.3).
    usage: dict[str, Usage] = Field(default_factory=dict)


class FoundInterview(BaseModel):
    """An interview file beside a tree, read and validated."""

    model_config = ConfigDict(frozen=True)

    path: str
    raw: bytes
    document: InterviewDocument

    def event(self, output: str) -> InterviewRecorded:
        current = AnswerLog(self.document.answer_log).current()
        return InterviewRecorded(
            output=output,
            source=self.path,
            questions=len(self.document.questions),
            answers=list(current.values()),
            usage=dict(self.document.planning_usage),
        )


def find_interview(tree_path: Path) -> FoundInterview | None:
    """The interview beside ``tree_path`` (``interview.json`` in its directory), if any.

    Raises:
        InputError: the file exists but is not an interview (naming the file and field).
    """
    path = tree_path.parent / INTERVIEW_FILE
    if not (path.exists() or path.is_symlink()):
        return None  # a directory or a dangling link by that name is refused below
    raw, doc = read_json_input(path, MAX_INTERVIEW_BYTES)
    known = InterviewDocument.model_fields
    # Keys the model does not know are kept (Pact's files have more than we read), but
    # a document with none of its keys is some other file, not an empty interview.
    if isinstance(doc, dict) and not doc.keys() & known.keys():
        keys = ", ".join(repr(str(k)[:40]) for k in list(doc)[:5]) or "none"
        raise InputError(
            f"{path}: not an interview: none of its keys ({keys}) is one of an interview's "
            f"({', '.join(known)}); put Pact's interview.json beside the tree, or remove it"
        )
    try:
        document = InterviewDocument.model_validate(doc)
    except ValidationError as exc:
        problems = validation_problems(exc, "interview")
        raise InputError(f"{path}: not an interview: {problems}") from None
    return FoundInterview(path=str(path), raw=raw, document=document)


def record_interview(project: ProjectDir, found: FoundInterview) -> InterviewRecorded:
    """Store the interview in the run's artifact store and log it (right after the run
    started, before anything is dispatched)."""
    # The audit log imports the event union, which imports this module.
    from scheduler.audit import AuditLog

    store = project.store()
    digest = store.put_bundle({INTERVIEW_FILE: found.raw})
    store.sync()
    with AuditLog(project.audit_path) as audit:
        event = audit.append(found.event(digest))
    assert isinstance(event, InterviewRecorded)
    return event
