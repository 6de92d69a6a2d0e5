"""The ``pact`` command line. Commands only parse options and call one function
of :mod:`scheduler.commands`.

Exit codes: 0 the run is done, 1 the run failed (or paused), 2 bad input.
Every option can also be set with the ``PACT_*`` environment variable shown in
``--help``.
"""

from __future__ import annotations

import os
import sys
import tempfile
import traceback

# The command modules register themselves on ``app`` when imported, in the order
# ``pact --help`` lists them: a run's life first, then what judges it, then the
# fleet. Each imports at its top only what its options and help need; what its
# commands do is imported inside them, so that ``pact --help`` loads neither the run
# loop nor redis-py (half its start-up time).
from scheduler.cli import runs  # noqa: F401

# isort: split
from scheduler.cli import cancel  # noqa: F401

# isort: split
from scheduler.cli import provenance  # noqa: F401

# isort: split
from scheduler.cli import validate  # noqa: F401

# isort: split
from scheduler.cli import review  # noqa: F401

# isort: split
from scheduler.cli import frontdoor  # noqa: F401

# isort: split
from scheduler.cli import doctor  # noqa: F401

# isort: split
from scheduler.cli import fleet  # noqa: F401

# isort: split
from scheduler.cli import mcp  # noqa: F401
from scheduler.cli.app import EXIT_INTERNAL, EXIT_INTERRUPTED, app, say

__all__ = ["app", "main"]


def main() -> None:
    # Put this interpreter's directory first on PATH, so that the default
    # environment (python_path: python3, required_tools: [pytest]) finds the
    # environment pact is installed in even when it is not activated.
    bindir = os.path.dirname(sys.executable)
    path = os.environ.get("PATH", "")
    if bindir and bindir not in path.split(os.pathsep):
        os.environ["PATH"] = os.pathsep.join([bindir, path]) if path else bindir
    try:
        app()
    except KeyboardInterrupt:
        say("stopped before anything was started", label="interrupted", to_err=True)
        raise SystemExit(EXIT_INTERRUPTED) from None
    except Exception as exc:  # a bug: say so in one line, keep the traceback in a file
        raise SystemExit(report_crash(exc)) from None


def report_crash(exc: BaseException) -> int:
    """Write the traceback of an unexpected error to a file and say where it is."""
    text = "".join(traceback.format_exception(exc))
    fd, path = tempfile.mkstemp(prefix="pact-crash-", suffix=".txt")
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(f"pact {' '.join(sys.argv[1:])}\n\n{text}")
    say(
        f"internal error ({type(exc).__name__}: {exc}); this is a bug in pact-fleet, not in "
        f"your input. The details are in {path}: please report them",
        label="error",
        to_err=True,
    )
    return EXIT_INTERNAL
