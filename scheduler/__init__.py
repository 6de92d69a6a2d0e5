"""The control plane: wavefront, run state, audit log, policies, executors, CLI."""

from scheduler.fold import fold
from scheduler.launch import load_state, start_run
from scheduler.run import RunController
from scheduler.settings import Settings, load_settings
from scheduler.state import RunState, RunStatus
from scheduler.wavefront import ComponentState, SchedulingMode, WavefrontScheduler

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
