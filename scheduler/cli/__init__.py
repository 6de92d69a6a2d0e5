"""The ``pact`` command line. Commands only parse options and call one function
of :mod:`scheduler.commands`.

Exit codes: 0 the run is done, 1 the run failed (or paused), 2 bad input.
Every option can also be set with the ``PACT_*`` environment variable shown in
``--help``.
"""

from __future__ import annotations

import os
import sys

# The command modules register themselves on ``app`` when imported, in the order
# ``pact --help`` lists them.
from scheduler.cli import runs  # noqa: F401

# isort: split
from scheduler.cli import doctor  # noqa: F401

# isort: split
from scheduler.cli import fleet  # noqa: F401
from scheduler.cli.app import app

__all__ = ["app", "main"]


def main() -> None:
    # Put this interpreter's directory first on PATH, so that the default
    # environment (python_path: python3, required_tools: [pytest]) finds the
    # environment pact is installed in even when it is not activated.
    bindir = os.path.dirname(sys.executable)
    path = os.environ.get("PATH", "")
    if bindir and bindir not in path.split(os.pathsep):
        os.environ["PATH"] = os.pathsep.join([bindir, path]) if path else bindir
    app()
