"""Driving a run from a command: the progress display, Ctrl-C (the run is saved for
``pact resume``), bad input as exit 2, then the run's summary and its exit code. Every
command that starts or carries on a run ends this way."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn

import typer

from scheduler.cli.app import user_errors
from scheduler.cli.interrupt import interruptible
from scheduler.cli.views import ProgressListener, exit_for, print_summary, progress_display
from scheduler.state import RunState

#: What drives the run: given the progress listener and the stop flag Ctrl-C sets.
Drive = Callable[[ProgressListener, threading.Event], RunState]


def drive_and_exit(project: Path, drive: Drive) -> NoReturn:
    """Run ``drive`` for the run in ``project``, print its summary and exit with its
    code (2 when ``drive`` raised bad input: nothing was written)."""
    with user_errors(), interruptible(project) as stop, progress_display() as progress:
        state = drive(ProgressListener(progress), stop)
    print_summary(state, project)
    raise typer.Exit(exit_for(state))
