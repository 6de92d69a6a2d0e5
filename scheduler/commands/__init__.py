"""What the CLI commands do, as keyword-only functions (testable without the CLI).

One module per command family; the CLI (``scheduler.cli``) only parses options
and calls these. Every function validates all of its input before it writes
anything: bad input raises an :class:`InputError` and leaves the disk untouched.

The functions load with their module on first use (PEP 562): a command that reads a
run's state does not import the run loop, Celery or redis-py.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pact_workers.exports import lazy_exports

__all__ = [
    "EXAMPLE",
    "EXECUTORS",
    "PIPELINE_ROLES",
    "SANDBOXES",
    "Check",
    "RunPlan",
    "ValidationRun",
    "check_executor",
    "check_worker_queues",
    "check_workers",
    "demo_directory",
    "doctor_checks",
    "drive_run",
    "example_dir",
    "fleet_warning",
    "fleet_workers",
    "list_service_runs",
    "make_agent",
    "make_sandbox",
    "make_service",
    "prepare_run",
    "read_status",
    "rebuild_run",
    "resume_run",
    "roles_without_workers",
    "run_demo",
    "run_plan",
    "run_tree",
    "state_json_problems",
    "status_report",
    "submit_batch",
    "supervise",
    "validate_path",
    "worker_argv",
]

#: Where each public name lives.
_SUBMODULES = {
    "EXAMPLE": "scheduler.commands.demo",
    "EXECUTORS": "scheduler.commands.fleet",
    "PIPELINE_ROLES": "scheduler.commands.fleet",
    "SANDBOXES": "scheduler.commands.agents",
    "Check": "scheduler.commands.doctor",
    "RunPlan": "scheduler.commands.runs",
    "check_workers": "scheduler.commands.runs",
    "ValidationRun": "scheduler.commands.validate",
    "check_executor": "scheduler.commands.fleet",
    "check_worker_queues": "scheduler.commands.fleet",
    "demo_directory": "scheduler.commands.demo",
    "doctor_checks": "scheduler.commands.doctor",
    "drive_run": "scheduler.commands.runs",
    "example_dir": "scheduler.commands.demo",
    "fleet_warning": "scheduler.commands.fleet",
    "fleet_workers": "scheduler.commands.fleet",
    "list_service_runs": "scheduler.commands.fleet",
    "make_agent": "scheduler.commands.agents",
    "make_sandbox": "scheduler.commands.agents",
    "make_service": "scheduler.commands.fleet",
    "prepare_run": "scheduler.commands.runs",
    "read_status": "scheduler.commands.inspection",
    "rebuild_run": "scheduler.commands.inspection",
    "resume_run": "scheduler.commands.resuming",
    "roles_without_workers": "scheduler.commands.fleet",
    "run_demo": "scheduler.commands.demo",
    "run_plan": "scheduler.commands.runs",
    "run_tree": "scheduler.commands.runs",
    "state_json_problems": "scheduler.commands.inspection",
    "status_report": "scheduler.commands.inspection",
    "submit_batch": "scheduler.commands.fleet",
    "supervise": "scheduler.commands.supervisor",
    "validate_path": "scheduler.commands.validate",
    "worker_argv": "scheduler.commands.fleet",
}

if TYPE_CHECKING:
    from scheduler.commands.agents import SANDBOXES, make_agent, make_sandbox
    from scheduler.commands.demo import EXAMPLE, demo_directory, example_dir, run_demo
    from scheduler.commands.doctor import Check, doctor_checks
    from scheduler.commands.fleet import (
        EXECUTORS,
        PIPELINE_ROLES,
        check_executor,
        check_worker_queues,
        fleet_warning,
        fleet_workers,
        list_service_runs,
        make_service,
        roles_without_workers,
        submit_batch,
        worker_argv,
    )
    from scheduler.commands.inspection import (
        read_status,
        rebuild_run,
        state_json_problems,
        status_report,
    )
    from scheduler.commands.resuming import resume_run
    from scheduler.commands.runs import (
        RunPlan,
        check_workers,
        drive_run,
        prepare_run,
        run_plan,
        run_tree,
    )
    from scheduler.commands.supervisor import supervise
    from scheduler.commands.validate import ValidationRun, validate_path


__getattr__, __dir__ = lazy_exports(globals(), _SUBMODULES)
