"""``pact validate``: every finding of every contract of a run or a contracts directory."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from scheduler.cli.app import EXIT_FAILED, EXIT_OK, app, print_json, say, user_errors
from scheduler.cli.options import given_path


@app.command()
def validate(
    path: Annotated[
        Path,
        typer.Argument(
            parser=given_path,
            help="A run's project directory, or a directory of <component>/interface.json "
            "files (Pact's contracts/, history/<timestamp>.json included)",
        ),
    ],
    tree: Annotated[
        Path | None,
        typer.Option(
            "--tree",
            parser=given_path,
            envvar="PACT_TREE",
            help="The decomposition tree (default: the run's, or ../decomposition/tree.json)",
        ),
    ] = None,
    contract_quality: Annotated[
        str | None,
        typer.Option(
            "--contract-quality",
            envvar="PACT_CONTRACT_QUALITY",
            help="warn or block: whether vague wording and side-effect findings are "
            "warnings or errors (default: the run's pact.yaml, else warn)",
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output")] = False,
) -> None:
    """Validate contracts: dependencies, types, locality and quality (exit 1 on errors)."""
    from scheduler import commands

    with user_errors():
        result = commands.validate_path(path=path, tree_path=tree, quality=contract_quality)
    report = result.report
    drift_errors = [f for f in result.drift if f.severity == "error"]
    if as_json:
        print_json(
            {
                **report.as_json(),
                "contract_quality": result.quality.value,
                "drift": [f.model_dump() for f in result.drift],
            }
        )
    else:
        for finding in report.findings:
            where = (
                f"{finding.component_id}: {finding.path}" if finding.path else finding.component_id
            )
            say(f"{where}: {finding.message}", label=finding.severity.value)
        for drift in result.drift:
            say(drift.message, label=f"drift {drift.severity}")
        say(
            f"{len(report.checks)} contracts: {len(report.errors)} errors, "
            f"{len(report.warnings)} warnings (contract_quality: {result.quality.value})"
            + (
                f"; drift: {len(drift_errors)} errors, "
                f"{len(result.drift) - len(drift_errors)} warnings"
                if result.drift
                else ""
            )
        )
    raise typer.Exit(EXIT_FAILED if report.errors or drift_errors else EXIT_OK)
