"""``pact resume``: a failed, paused or interrupted run carried on from where it stopped."""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Sequence
from pathlib import Path

from pact_workers.agents.factory import build_agent
from pact_workers.errors import InputError, RunDirError
from scheduler.audit import AuditLog
from scheduler.cache import embedded_cache
from scheduler.commands.agents import make_agent, make_sandbox
from scheduler.commands.fleet import check_executor
from scheduler.commands.inspection import state_json_problems
from scheduler.commands.rundir import check_run_dir
from scheduler.commands.runs import check_environment, check_workers, drive_run, require_keys
from scheduler.journal import Listener
from scheduler.launch import load_run
from scheduler.lifecycle.cancel import void_fleet_request
from scheduler.project import ProjectDir
from scheduler.rebuild import disk_inconsistencies
from scheduler.repair import mend_from_project
from scheduler.resume import compute_resume_strategy, execute_resume
from scheduler.settings import load_settings
from scheduler.snapshot import snapshot_mark
from scheduler.state import RunState, RunStatus

log = logging.getLogger(__name__)


def resume_run(
    *,
    project_dir: Path,
    from_phase: str | None = None,
    agent_name: str | None = None,
    replay_dir: Path | None = None,
    workers: int = 4,
    sandbox_name: str = "local",
    listener: Listener | None = None,
    executor_name: str = "local",
    broker_url: str | None = None,
    stop: threading.Event | None = None,
    redo: Sequence[str] = (),
) -> tuple[RunState, list[str]]:
    """Resume a failed, paused or interrupted run; returns its final state and what
    was inconsistent on disk when it resumed (each fixed by the resume itself).
    ``redo``: done components to implement again (a completed run resumes for them).

    Raises:
        InputError: nothing to resume, another process drives the run, bad options.
    """
    check_workers(workers)
    broker_url = check_executor(executor_name, broker_url)
    project = ProjectDir(project_dir)
    check_run_dir(project, writes=True)
    if not os.access(project.pact, os.W_OK):
        raise RunDirError(f"{project.pact}: not writable by this user; cannot resume here")
    # The run is held from here to the end of its drive: a second resume started
    # meanwhile fails at once, instead of logging a resume of the state it read before
    # this one's (and a snapshot of that state) between this one's checks and its drive.
    with AuditLog(project.audit_path) as audit:  # fails when another process holds it
        state, _, covered = load_run(project)
        settings = load_settings(project.settings_path)
        new_agent: tuple[str, dict[str, str]] | None = None
        sandbox = make_sandbox(sandbox_name)
        if agent_name is None and replay_dir is None:
            agent = build_agent(state.agent or "replay", dict(state.agent_options), sandbox=sandbox)
            name = state.agent or "replay"
        else:
            name = agent_name or state.agent or "replay"
            agent, options = make_agent(
                name, replay_dir=replay_dir, settings=settings, sandbox=sandbox
            )
            new_agent = (name, options)
        require_keys(settings, name, executor_name)
        if sandbox_name == "local":
            check_environment(settings, project.settings_path)
        cache_warnings: list[str] = []
        cache = embedded_cache(settings.cache, name, executor_name, cache_warnings)
        for warning in cache_warnings:
            log.warning(warning)
        interrupted = state.status is RunStatus.ACTIVE
        basis = state.model_copy(update={"status": RunStatus.PAUSED}) if interrupted else state
        try:
            strategy = compute_resume_strategy(basis, project, from_phase=from_phase, redo=redo)
        except ValueError as exc:
            raise InputError(f"{project_dir}: cannot resume: {exc}") from exc
        store = project.store()
        mend = mend_from_project(state, project, store)
        if mend.lost and executor_name != "celery":  # a fleet's Redis may still hold them
            shown = "; ".join(mend.lost[:5]) + (
                f"; and {len(mend.lost) - 5} more" if len(mend.lost) > 5 else ""
            )
            raise RunDirError(
                f"{project.artifacts_dir}: verified outputs that are missing or corrupt, with "
                f"no intact promoted copy to restore them from: {shown}. Nothing was written; "
                "restore .pact/artifacts (or those files) from a backup, then resume"
            )
        if mend.blobs:
            mend.write(store)
            log.warning(
                "%d blob(s) of verified outputs were missing or corrupt in %s: written again "
                "from the promoted copies, which hash to them",
                len(mend.blobs),
                project.artifacts_dir,
            )
        # After the strategy: a run with nothing to resume is told so before anything is
        # checked. An intact snapshot and the log's tail are the log's fold: state.json being
        # behind the log is how snapshots work (a killed run's always is), not something to
        # repair, so only the disk is checked. Any other state.json is compared with the
        # state, which then is the fold of the whole log.
        if covered is not None:
            problems = disk_inconsistencies(state, project)
        else:
            problems = state_json_problems(project_dir=project_dir, truth=state)
        if interrupted:
            basis.pause_reason = (
                "interrupted: the previous pact process stopped before the run ended"
            )
        resumed = execute_resume(
            basis,
            strategy,
            inconsistencies=problems,
            original_status="interrupted" if interrupted else None,
            agent=new_agent,
            in_place=True,  # the run is driven from the log and its new snapshot
            audit=audit,
        )
        if executor_name == "celery" and broker_url is not None:
            # A resume lifts a cancel: a fleet request no scheduler took before it stopped is void.
            void_fleet_request(broker_url, state.run_id)
        final = drive_run(
            project=project,
            settings=settings,
            agent=agent,
            sandbox=sandbox,
            workers=workers,
            listener=listener,
            executor_name=executor_name,
            broker_url=broker_url,
            stop=stop,
            cache=cache,
            opened=resumed,
            opened_mark=snapshot_mark(project),  # what the snapshot of `resumed` covers
            audit=audit,
        )
        return final, problems
