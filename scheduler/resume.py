"""Resuming a failed or paused run without editing any file by hand (seed 000, 1.1)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from pydantic import BaseModel, Field

from pact_workers.models.work import ItemStatus, Phase
from scheduler.audit import AuditLog
from scheduler.events import RunResumed
from scheduler.fold import PACT_PHASE_ORDER, apply
from scheduler.lifecycle.cancel import REQUEST_FILE
from scheduler.project import ProjectDir
from scheduler.state import RunState, RunStatus, final_phase
from scheduler.state_index import PACT_PHASE, WAITING

ResumePhase = Literal["interview", "decompose", "contract", "implement", "integrate"]

#: Items a resume gives a fresh start; done items are never among them.
RESETTABLE = frozenset(
    {
        ItemStatus.FAILED,
        ItemStatus.POISONED,
        ItemStatus.SUSPENDED,
        ItemStatus.PENDING,
        ItemStatus.READY,
        ItemStatus.CANCELLED,
    }
)


class ResumeStrategy(BaseModel):
    """Computed strategy for resuming a failed or paused run."""

    last_checkpoint: str = Field(description="Component ID of the last successful checkpoint")
    completed_components: list[str] = Field(default_factory=list)
    resume_phase: ResumePhase
    cleared_fields: list[str] = Field(description="State fields that will be reset")
    reset_items: list[tuple[str, Phase]] = Field(default_factory=list)
    #: Done items to do again (``--redo``): each named component's final phase.
    redo_items: list[tuple[str, Phase]] = Field(default_factory=list)


def compute_resume_strategy(
    state: RunState,
    project: ProjectDir,
    *,
    from_phase: str | None = None,
    redo: Sequence[str] = (),
) -> ResumeStrategy:
    """Work out where a failed or paused run resumes; pure apart from reading the disk.

    Raises:
        ValueError: the run is active or already complete, or ``from_phase`` is
            later than the point of failure (resume never skips past it).
    """
    if state.status is RunStatus.ACTIVE:
        raise ValueError("Run is already active")
    assert state.tree is not None
    redo_items = redo_items_of(state, redo)
    if state.status is RunStatus.COMPLETED and not redo_items:
        raise ValueError("Run is already complete; nothing to resume")
    completed = [
        cid
        for cid in state.tree.topological_order()
        if state.item(cid, final_phase(state.tree, cid)).status is ItemStatus.DONE
        and (project.contracts_dir / cid / "interface.json").is_file()
        and (project.contracts_dir / cid / "tests").is_dir()
    ]
    done = [i for i in state.items.values() if i.status is ItemStatus.DONE]
    last = max(done, key=lambda i: i.updated_seq, default=None)
    open_items = [i for i in state.items.values() if i.status is not ItemStatus.DONE]
    if last is None:
        failure_phase: str = "interview"  # no checkpoint: start from the beginning
    else:
        failure_phase = min(
            (PACT_PHASE[i.phase] for i in open_items),
            key=PACT_PHASE_ORDER.index,
            default="integrate",
        )
    resume_phase = failure_phase
    if from_phase is not None:
        wanted = "contract" if from_phase == "test" else from_phase
        if wanted not in PACT_PHASE_ORDER[:-1]:
            raise ValueError(
                f"unknown phase {from_phase!r}; choose contract, implement or integrate"
            )
        if PACT_PHASE_ORDER.index(wanted) > PACT_PHASE_ORDER.index(failure_phase):
            raise ValueError(
                f"--from-phase {from_phase} is past the point of failure ({failure_phase}); "
                "resume never skips unfinished work"
            )
        resume_phase = wanted
    start = PACT_PHASE_ORDER.index(resume_phase)
    reset = [
        (i.component_id, i.phase)
        for i in state.items.values()
        if i.status in RESETTABLE
        and PACT_PHASE_ORDER.index(PACT_PHASE[i.phase]) >= start
        and (i.status not in WAITING or i.suspension is not None)
    ]
    cleared = ["status", "pause_reason", "recommendation", "fail_reason"]
    cleared += [f"items.{c}/{p.value}" for c, p in reset]
    return ResumeStrategy(
        last_checkpoint=last.component_id if last else "",
        completed_components=completed,
        resume_phase=resume_phase,
        cleared_fields=cleared,
        reset_items=reset,
        redo_items=redo_items,
    )


def redo_items_of(state: RunState, components: Sequence[str]) -> list[tuple[str, Phase]]:
    """The final phase of each component to do again; each must be done.

    Raises:
        ValueError: naming a component the run does not have, or one not done yet.
    """
    assert state.tree is not None
    items: list[tuple[str, Phase]] = []
    for cid in dict.fromkeys(components):
        if cid not in state.tree.nodes:
            raise ValueError(f"--redo {cid!r}: no such component in this run")
        phase = final_phase(state.tree, cid)
        if state.item(cid, phase).status is not ItemStatus.DONE:
            raise ValueError(
                f"--redo {cid!r}: its {phase.value} is not done yet; a resume retries it anyway"
            )
        items.append((cid, phase))
    return items


def execute_resume(
    state: RunState,
    strategy: ResumeStrategy,
    *,
    inconsistencies: list[str] | None = None,
    original_status: str | None = None,
    agent: tuple[str, dict[str, str]] | None = None,
    in_place: bool = False,
    audit: AuditLog | None = None,
) -> RunState:
    """Log ``run_resumed`` with the original failure reason, then apply it.

    Writes the audit log (the event) and state.json (the new snapshot); the
    project directory is ``state.project_dir``. The event is applied to a copy of
    ``state``, or with ``in_place`` to ``state`` itself (for a caller that has no other
    use for it: a deep copy takes about a second at 10,000 components). ``audit``: the
    run's log, open, when the caller holds the run from its checks on (left open);
    otherwise the log is opened for the event.
    """
    if not state.project_dir:
        raise ValueError("state.project_dir is not set; load the state with rebuild_state")
    project = ProjectDir(state.project_dir)
    original = state.fail_reason or state.pause_reason
    held = audit if audit is not None else AuditLog(project.audit_path).open()
    try:
        event = held.append(
            RunResumed(
                original_status=original_status or state.status.value,
                original_reason=original,
                resume_phase=strategy.resume_phase,
                reset_items=strategy.reset_items,
                redo_items=strategy.redo_items,
                inconsistencies=list(inconsistencies or []),
                agent=agent[0] if agent else "",
                agent_options=agent[1] if agent else {},
            )
        )
    finally:
        if audit is None:
            held.close()
    new = apply(state if in_place else state.model_copy(deep=True), event)
    new.project_dir = state.project_dir
    project.write_state(new)
    # A resume lifts a cancel: a request no process took before it stopped is void.
    (project.pact / REQUEST_FILE).unlink(missing_ok=True)
    return new
