"""``state.json``: a snapshot of the run state that says where in the log it stands.

The audit log is the truth; folding all of it is linear but not free (a run of ten
thousand components logs a hundred thousand events). So a snapshot records the
byte offset of the log it covers and a digest of the log's last line before that
offset. A reader that finds the mark intact folds only the log's tail onto the
snapshot; a mark that does not match (the log was cut, replaced or edited, or the
snapshot is from elsewhere) falls back to the full fold. The snapshot is written
compactly (fields at their defaults left out) and atomically, by
:meth:`scheduler.project.ProjectDir.write_state`.

A ``state.json`` without a mark (the bare state written before marks existed) still
reads as a state; it is simply never used as a starting point.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel, ValidationError

from pact_workers.gcpause import collector_paused
from scheduler.audit import line_before, scan_events
from scheduler.lifecycle.damaged import fold_as_read
from scheduler.state import RunState

if TYPE_CHECKING:
    from scheduler.project import ProjectDir

__all__ = ["Snapshot", "load_folded", "log_mark", "parse_state_json", "read_snapshot"]


class Snapshot(BaseModel):
    """What state.json holds: the state, the mark of the log prefix it covers, and
    whether the state is the one written with that mark (its digest matches: a state
    edited by hand or cut short is never used as a starting point)."""

    log_offset: int = 0
    log_tail_digest: str = ""
    intact: bool = False
    state: RunState


_HEADER = re.compile(
    rb'^\{"log_offset":(\d+),"log_tail_digest":"([0-9a-f]*)","state_digest":"([0-9a-f]*)","state":'
)


#: Where a log ends: its size in bytes and the digest of its last line (see log_mark).
LogMark = tuple[int, str]


def log_mark(log: Path, offset: int | None = None) -> LogMark:
    """(offset, digest of the line that ends there) of ``log``; the end by default."""
    try:
        size = log.stat().st_size
    except FileNotFoundError:
        return 0, ""
    offset = size if offset is None else offset
    if offset <= 0 or offset > size:
        return offset, ""
    return offset, hashlib.sha256(line_before(log, offset)).hexdigest()


def snapshot_bytes(state: RunState, log: Path, offset: int | None = None) -> list[bytes]:
    """state.json's content for ``state``, marked as covering ``log`` up to ``offset``
    (default: as it is now), in pieces to be written one after the other (the state of
    a large run is tens of megabytes: it is serialised once, never copied). A writer
    that knows how much of the log it wrote says so: lines another process appended
    since are then not claimed."""
    offset, digest = log_mark(log, offset)
    body = RunState.__pydantic_serializer__.to_json(state, exclude_defaults=True)
    header = (
        f'{{"log_offset":{offset},"log_tail_digest":"{digest}",'
        f'"state_digest":"{hashlib.sha256(body).hexdigest()}","state":'
    ).encode()
    return [header, body, b"}\n"]


def parse_state_json(raw: bytes) -> Snapshot:
    """A snapshot from state.json's bytes (a bare state reads as one without a mark).

    Raises:
        ValidationError: not a state.
        ValueError: not JSON.
    """
    header = _HEADER.match(raw)
    if header is None:
        # A bare state (the old layout), or a snapshot rewritten by someone else: read
        # it for what it says, but never start from it.
        doc = json.loads(raw)
        if isinstance(doc, dict) and isinstance(doc.get("state"), dict):
            doc = doc["state"]
        return Snapshot(state=RunState.model_validate(doc))
    body = raw[header.end() :].rstrip()
    body = body[:-1] if body.endswith(b"}") else body
    with collector_paused():
        state = RunState.model_validate_json(body)
    return Snapshot(
        log_offset=int(header.group(1)),
        log_tail_digest=header.group(2).decode(),
        intact=hashlib.sha256(body).hexdigest() == header.group(3).decode(),
        state=state,
    )


def snapshot_mark(project: ProjectDir) -> LogMark | None:
    """The log mark state.json says it covers, read from its header alone (None: it
    has none, or cannot be read)."""
    try:
        with project.state_path.open("rb") as fh:
            header = _HEADER.match(fh.read(256))
    except OSError:
        return None
    return None if header is None else (int(header.group(1)), header.group(2).decode())


def read_snapshot(project: ProjectDir) -> Snapshot | None:
    """The snapshot, if it is readable and its mark matches the log (else None). The
    mark is checked from the header first: a stale snapshot of a large run is not
    parsed for nothing."""
    mark = snapshot_mark(project)
    if mark is None or not mark[0] or not mark[1]:
        return None
    if log_mark(project.audit_path, mark[0])[1] != mark[1]:
        return None
    try:
        snap = parse_state_json(project.state_path.read_bytes())
    except (OSError, ValidationError, ValueError):
        return None
    if not snap.intact or (snap.log_offset, snap.log_tail_digest) != mark:
        return None  # damaged, or written anew since the header was read
    return snap


def load_folded(project: ProjectDir) -> tuple[RunState, list[str], int | None]:
    """The state of the whole log: the snapshot plus the log's tail when the snapshot's
    mark matches, else a fold of the whole log, one line at a time. Also: the warnings
    about unreadable lines read, and the last event the snapshot covered when it was
    the starting point (its ``seq``; None: the whole log was folded)."""
    snap = read_snapshot(project)
    warnings: list[str] = []
    if snap is not None:
        covered = snap.state.last_seq  # the fold goes on in this very state
        tail = scan_events(project.audit_path, warnings, offset=snap.log_offset)
        return fold_as_read(tail, warnings, snap.state), warnings, covered
    # Folded as far as it goes when lines are unreadable: the events a lost line made
    # illegal are skipped.
    with collector_paused():
        state = fold_as_read(scan_events(project.audit_path, warnings), warnings)
    return state, warnings, None
