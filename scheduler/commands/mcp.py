"""What ``pact mcp`` serves, as plain functions over one project (and, optionally, the
scheduler service): the same functions the CLI's commands call, answering JSON-ready
documents. The MCP server (:mod:`pact_workers.mcp`) only registers them.

The project is the one given, else the working directory when it holds a run; with
neither, every answer is a :class:`NoProject` error saying how to give one (the server
still starts). Reading is free; resuming a run and submitting trees change things and
are refused unless the caller passes ``confirm=True``. Contracts are read as
``pact validate`` reads them (the same checks, the same messages). One resume at a time:
a client's parallel calls would otherwise race for the run between the check that no
one drives it and the first event written.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

from pact_workers.errors import InputError, RunDirError
from pact_workers.files import given_path
from pact_workers.models.documents import not_a_directory
from pact_workers.verify import CONTRACT_FILE
from scheduler.budget import PhaseBudget
from scheduler.commands.fleet import list_service_runs, submit_batch
from scheduler.commands.inspection import status_report
from scheduler.commands.provenance import show_retrospective
from scheduler.commands.resuming import resume_run
from scheduler.commands.statusdoc import status_json
from scheduler.commands.validate import read_contract, read_contracts, validate_path
from scheduler.project import ProjectDir
from scheduler.settings import load_settings
from scheduler.tally import ProgressTally, Report


class NoProject(InputError):
    """The server was started without a project, and the working directory holds none."""


class NotConfirmed(InputError):
    """A state-changing tool was called without ``confirm: true``."""


def discover_project(explicit: Path | None, cwd: Path) -> Path | None:
    """The project to serve: the one given, else ``cwd`` when it holds a run."""
    if explicit is not None:
        return explicit
    return cwd if ProjectDir(cwd).has_run() else None


class ProjectTools:
    """The resources and tools of one project (``project`` None: not given)."""

    def __init__(self, project: Path | None, *, broker_url: str | None = None) -> None:
        self.project = project
        self.broker_url = broker_url
        self._resuming = threading.Lock()

    def _project(self) -> Path:
        if self.project is None:
            raise NoProject(
                "no pact project: start the server with `pact mcp --project DIR`, or in a "
                "directory that holds a run (.pact/audit.jsonl)"
            )
        return self.project

    # -- resources (read-only) ---------------------------------------------------------

    def status(self) -> dict[str, Any]:
        """The run's state: what ``pact status --json`` reports of it, and provenance."""
        return status_json(self._project())

    def contracts(self) -> list[dict[str, Any]]:
        """Every promoted contract, summarised."""
        project = ProjectDir(self._project())
        project.require_run()
        found = []
        directory = project.contracts_dir
        for contract in read_contracts(directory, None) if directory.is_dir() else []:
            found.append(
                {
                    "component_id": contract.component_id,
                    "name": contract.name,
                    "description": contract.description,
                    "version": contract.version,
                    "functions": [f.name for f in contract.functions],
                    "dependencies": contract.dependencies,
                }
            )
        return found

    def contract(self, component_id: str) -> dict[str, Any]:
        """One component's promoted contract, whole."""
        project = ProjectDir(self._project())
        project.require_run()
        known = {p.parent.name for p in project.contracts_dir.glob(f"*/{CONTRACT_FILE}")}
        if component_id not in known:
            raise InputError(
                f"component {component_id!r}: no promoted contract; known: "
                f"{', '.join(sorted(known)) or '(none yet)'}"
            )
        interface = project.contracts_dir / component_id / CONTRACT_FILE
        return read_contract(interface, component_id).model_dump(mode="json")

    def budget(self) -> dict[str, Any]:
        """Spend against the budget, by phase (as ``pact status`` shows it)."""
        project = self._project()
        state, _, _ = status_report(project_dir=project)
        try:
            settings = load_settings(ProjectDir(project).settings_path)
        except InputError as exc:  # as `pact status`: the spend without caps, and why
            settings, warnings = None, [str(exc)]
        else:
            warnings = []
        total = settings.budget_usd if settings else None
        phases = PhaseBudget(
            phase_spend=dict(state.spend_by_phase),
            phase_caps=settings.budget.phase_caps if settings else {},
        ).phase_summary(total)
        return {
            "spent_usd": state.usage.cost_usd,
            "budget_usd": total,
            "remaining_usd": None if total is None else max(0.0, total - state.usage.cost_usd),
            "tokens": {"input": state.usage.input_tokens, "output": state.usage.output_tokens},
            "phases": phases,
            "warnings": warnings,
        }

    def retrospective(self) -> dict[str, Any]:
        """The latest retrospective (generated, unsaved, for a run not yet ended)."""
        retro, saved = show_retrospective(project_dir=self._project())
        return {**retro.model_dump(mode="json"), "saved": saved}

    def runs(self) -> list[dict[str, Any]]:
        """The scheduler service's runs (needs ``--broker``)."""
        if not self.broker_url:
            raise InputError(
                "no scheduler service: start the server with `pact mcp --broker redis://...`"
            )
        return [e.model_dump(mode="json") for e in list_service_runs(broker_url=self.broker_url)]

    # -- tools -------------------------------------------------------------------------

    def validate(self) -> dict[str, Any]:
        """``pact validate`` of the project: every finding, and drift, structured."""
        result = validate_path(path=self._project())
        drift = [f.model_dump() for f in result.drift]
        report = result.report.as_json()
        return {
            **report,
            "contract_quality": result.quality.value,
            "drift": drift,
            "ok": not result.report.errors and not any(d["severity"] == "error" for d in drift),
        }

    def resume(
        self,
        *,
        confirm: bool,
        from_phase: str | None = None,
        progress: Report | None = None,
        stop: threading.Event | None = None,
    ) -> dict[str, Any]:
        """Resume the project's failed, paused or interrupted run (state-changing);
        ``progress`` is told how far it has come as it goes (:class:`ProgressTally`),
        and ``stop``, once set, stops it after the current step (interrupted)."""
        project = self._project()
        if confirm is not True:
            raise NotConfirmed(
                f"pact_resume changes the run in {project}: call it again with "
                '"confirm": true to resume it'
            )
        if not self._resuming.acquire(blocking=False):
            raise RunDirError(
                f"{project}: this server is already resuming the run (an earlier pact_resume "
                "call); wait for that call to end, and read pact://status to follow it"
            )
        try:
            state, repaired = resume_run(
                project_dir=project,
                from_phase=from_phase,
                listener=None if progress is None else ProgressTally(progress),
                stop=stop,
            )
        finally:
            self._resuming.release()
        return {"run_id": state.run_id, "status": state.status.value, "repaired": repaired}

    def submit(
        self, *, trees: list[str], confirm: bool, agent: str, replay_dir: str | None, priority: int
    ) -> dict[str, Any]:
        """Queue trees on the scheduler service (state-changing)."""
        if not self.broker_url:
            raise InputError(
                "no scheduler service: start the server with `pact mcp --broker redis://...`"
            )
        paths = [given_path(tree, f"trees[{i}]") for i, tree in enumerate(trees)]
        replay = None if replay_dir is None else given_path(replay_dir, "replay_dir")
        if agent == "replay" and replay is None:  # named as the client spells it
            raise InputError(
                "replay_dir: the replay agent serves artifacts from a directory; give it"
            )
        if confirm is not True:
            raise NotConfirmed(
                f"pact_submit queues {len(trees)} tree(s) as runs: call it again with "
                '"confirm": true to submit them'
            )
        queued, errors = submit_batch(
            broker_url=self.broker_url,
            trees=paths,
            priority=priority,
            agent=agent,
            replay_dir=replay,
        )
        return {"queued": [e.model_dump(mode="json") for e in queued], "rejected": errors}


def as_text(doc: Any) -> str:
    return json.dumps(doc, indent=2, sort_keys=False, default=str)


def serve_mcp(
    *,
    project: Path | None,
    cwd: Path,
    http_port: int | None = None,
    host: str = "127.0.0.1",
    broker_url: str | None = None,
    token: str | None = None,
) -> None:
    """Serve the MCP server over stdio, or streamable HTTP on ``http_port``, until
    the client leaves (stdio) or the process is interrupted (HTTP).

    Raises:
        InputError: ``project`` is not a directory, the HTTP server has no token, or
            the MCP SDK is not installed.
    """
    if project is not None and not project.is_dir():
        raise InputError(
            f"--project {project}: {not_a_directory(project)}; give a project directory"
        )
    if http_port is not None and not token:
        raise InputError(
            "--http needs a bearer token: set PACT_MCP_TOKEN to a secret the clients send "
            "as `Authorization: Bearer <token>`"
        )
    try:
        from pact_workers.mcp import build_server
        from pact_workers.mcp.http import listen, serve_http
    except ImportError as exc:
        raise InputError(
            f"pact mcp needs the MCP SDK ({exc}); install it with `pip install 'pact-fleet[mcp]'`"
        ) from None
    from scheduler.provenance.metadata import pact_version

    tools = ProjectTools(discover_project(project, cwd), broker_url=broker_url)
    server = build_server(tools, version=pact_version())
    if http_port is None:
        server.run("stdio")
        return
    assert token is not None
    try:
        sockets = listen(host, http_port)
    except (OSError, UnicodeError) as exc:  # unresolvable (gaierror), in use, not ours
        reason = getattr(exc, "strerror", None) or str(exc)
        raise InputError(
            f"--host {host!r} --http {http_port}: cannot serve there ({reason}); give an "
            "address of this machine and a free port"
        ) from None
    serve_http(server, token=token, sockets=sockets, host=host)
