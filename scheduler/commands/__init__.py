"""What the CLI commands do, as keyword-only functions (testable without the CLI).

One module per command family; the CLI (``scheduler.cli``) only parses options
and calls these. Every function validates all of its input before it writes
anything: bad input raises an :class:`InputError` and leaves the disk untouched.
"""

from __future__ import annotations

from scheduler.commands.agents import SANDBOXES, make_agent, make_sandbox
from scheduler.commands.demo import EXAMPLE, demo_directory, example_dir, run_demo
from scheduler.commands.doctor import Check, doctor_checks
from scheduler.commands.fleet import (
    EXECUTORS,
    PIPELINE_ROLES,
    check_executor,
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
    drive_run,
    prepare_run,
    run_plan,
    run_tree,
)
from scheduler.commands.supervisor import supervise
from scheduler.commands.validate import ValidationRun, validate_path

__all__ = [
    "EXAMPLE",
    "EXECUTORS",
    "PIPELINE_ROLES",
    "SANDBOXES",
    "Check",
    "RunPlan",
    "ValidationRun",
    "check_executor",
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
