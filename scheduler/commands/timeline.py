"""``pact timeline DIR -o FILE``: draw a run's attempts as a Gantt chart.

The output's suffix names the format (.svg, .png, .html); its directory must exist.
The path drawn last is recorded in ``.pact/timeline.json`` so that ``pact status``
can say where the latest picture is.
"""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from pact_workers.errors import InputError
from pact_workers.files import atomic_write
from pact_workers.gcpause import collector_paused
from pact_workers.models.documents import not_a_directory
from scheduler.audit import iter_events
from scheduler.commands.provenance import TIMELINE_RECORD
from scheduler.commands.rundir import check_run_dir
from scheduler.launch import load_state
from scheduler.project import ProjectDir

if TYPE_CHECKING:
    from scheduler.timeline import RunPicture

FORMATS = (".svg", ".png", ".html")


def check_output(output: Path) -> None:
    """``output`` can take a picture (before anything is read or drawn).

    Raises:
        InputError: naming ``-o`` and what to do.
    """
    if output.suffix.lower() not in FORMATS:
        raise InputError(
            f"-o {output}: unknown picture format {output.suffix or '(none)'!r}; "
            f"name a file ending in {', '.join(FORMATS)}"
        )
    if output.is_dir():
        raise InputError(f"-o {output}: is a directory; name a file")
    parent = output.parent if str(output.parent) else Path(".")
    if not parent.is_dir():
        raise InputError(
            f"-o {output}: {parent}: {not_a_directory(parent)}; name a file in an existing "
            "directory"
        )
    if not os.access(parent, os.W_OK | os.X_OK):
        raise InputError(f"-o {output}: the directory {parent} is not writable by this user")


def draw_timeline(*, project_dir: Path, output: Path) -> RunPicture:
    """Draw the run in ``project_dir`` to ``output``; returns the picture.

    Raises:
        InputError: no run in ``project_dir``, or ``output`` cannot take a picture.
    """
    project = ProjectDir(project_dir)
    check_run_dir(project)
    check_output(output)
    try:
        # matplotlib (the optional extra ``timeline``) loads only for this command.
        from scheduler.timeline import collect_bars, picture, write_picture
    except ImportError as exc:
        raise InputError(
            f"pact timeline needs matplotlib ({exc}); install it with "
            "`pip install 'pact-fleet[timeline]'`"
        ) from None

    state, _ = load_state(project)
    # One pass over the log, one line at a time: the parsed events of a large run's
    # log take more memory than its bars.
    with collector_paused():
        run_id, bars = collect_bars(iter_events(project.audit_path))
    pic = picture(run_id or state.run_id, bars, state.tree, state.dependencies)
    write_picture(pic, output)
    record = {"path": str(output.resolve()), "written_at": datetime.now(UTC).isoformat()}
    atomic_write(project.root / TIMELINE_RECORD, json.dumps(record).encode() + b"\n")
    return pic
