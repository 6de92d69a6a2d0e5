"""The ``pact`` Typer app, its two consoles and its exit codes.

Exit codes: 0 the run is done, 1 the run failed (or paused), 2 bad input.
"""

from __future__ import annotations

import typer
from rich.console import Console

app = typer.Typer(
    name="pact",
    help="Run Pact decomposition trees: contract, test and implement every component.",
    no_args_is_help=True,
    add_completion=False,
)
out = Console()
err = Console(stderr=True)

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT = 0, 1, 2


def bad_input(exc: Exception) -> typer.Exit:
    err.print(f"[bold red]error:[/] {exc}", highlight=False, soft_wrap=True)
    return typer.Exit(EXIT_BAD_INPUT)
