"""The control plane: wavefront, run state, audit log, policies, executors, CLI."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pact_workers.exports import lazy_exports

# Eager: ``fold`` is also the name of its submodule, which would shadow a lazy
# ``fold`` once anything imported ``scheduler.fold``.
from scheduler.fold import fold

__all__ = [
    "ComponentState",
    "RunController",
    "RunState",
    "RunStatus",
    "SchedulingMode",
    "Settings",
    "WavefrontScheduler",
    "fold",
    "load_settings",
    "load_state",
    "start_run",
]

# Where each public name lives, imported on first use (PEP 562): importing any
# submodule, as every ``pact`` command does, imports this package first, and it
# should not load the run loop and the launch of a run with it.
_SUBMODULES = {
    "ComponentState": "scheduler.wavefront",
    "RunController": "scheduler.run",
    "RunState": "scheduler.state",
    "RunStatus": "scheduler.state",
    "SchedulingMode": "scheduler.wavefront",
    "Settings": "scheduler.settings",
    "WavefrontScheduler": "scheduler.wavefront",
    "load_settings": "scheduler.settings",
    "load_state": "scheduler.launch",
    "start_run": "scheduler.launch",
}

if TYPE_CHECKING:
    from scheduler.launch import load_state, start_run
    from scheduler.run import RunController
    from scheduler.settings import Settings, load_settings
    from scheduler.state import RunState, RunStatus
    from scheduler.wavefront import ComponentState, SchedulingMode, WavefrontScheduler


__getattr__, __dir__ = lazy_exports(globals(), _SUBMODULES)
