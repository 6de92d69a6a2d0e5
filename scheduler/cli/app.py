"""The ``pact`` Typer app, its two consoles, its exit codes and how errors are shown.

Exit codes: 0 the run is done, 1 the run failed (or paused, or a service it needs is
unreachable), 2 bad input (nothing was written), 3 the run stopped with items awaiting
a human's review (``pact review``), 130 interrupted (Ctrl-C; the run is
saved for ``pact resume``), 70 an internal error (a bug; the traceback goes to a file).

Everything a user or the wire gave us (paths, ids, error texts) may contain square
brackets; rich would read them as markup. So user text is only ever printed through
:func:`say` or as :class:`rich.text.Text`, never inside a markup string.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import typer
from rich.console import Console
from rich.text import Text

from pact_workers.errors import BrokerUnavailable, InputError

app = typer.Typer(
    name="pact",
    help="Run Pact decomposition trees: contract, test and implement every component.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)
out = Console(highlight=False)
err = Console(stderr=True, highlight=False)

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT, EXIT_INTERNAL, EXIT_INTERRUPTED = 0, 1, 2, 70, 130

#: Styles of the labels :func:`say` puts before a message.
LABELS = {
    "error": "bold red",
    "warning": "yellow",
    "note": "cyan",
    "paused": "yellow",
    "failed": "red",
    "rejected": "bold red",
    "interrupted": "yellow",
    "inconsistent": "yellow",
    "repaired on resume": "yellow",
}


def say(text: object, *, label: str = "", to_err: bool = False, style: str = "") -> None:
    """Print ``text`` literally (never as markup), after an optional styled label."""
    line = Text()
    if label:
        line.append(f"{label}: ", style=LABELS.get(label, "bold"))
    line.append(str(text), style=style)
    (err if to_err else out).print(line, soft_wrap=True)


def print_json(doc: Any) -> None:
    """Machine-readable output: plain JSON on stdout (rich's highlighter is slow on
    the documents of large runs, and machines need no colour)."""
    sys.stdout.write(json.dumps(doc) + "\n")
    sys.stdout.flush()


@contextmanager
def user_errors() -> Iterator[None]:
    """Turn the errors a user can cause into a message and an exit code.

    Bad input (exit 2) and an unreachable broker (exit 1); anything else is a bug
    and reaches :func:`scheduler.cli.main`'s last-resort handler.
    """
    try:
        yield
    except InputError as exc:
        say(exc, label="error", to_err=True)
        raise typer.Exit(EXIT_BAD_INPUT) from None
    except BrokerUnavailable as exc:
        say(exc, label="error", to_err=True)
        raise typer.Exit(EXIT_FAILED) from None
