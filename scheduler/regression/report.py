"""What ``pact status`` shows of the regression checks: each promotion's verdict and
the regressions it found (external ones included: they are recorded, not hidden)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from scheduler.state import RunState


def regression_lines(state: RunState) -> Iterator[str]:
    """One line per checked promotion, then one per regression it found."""
    for key, check in state.regressions.items():
        yield f"{key} attempt {check.attempt}: {check.status.value}" + (
            f" ({check.reason})" if check.reason else ""
        )
        for scope, findings in (
            ("intent", check.intent_regressions),
            ("external", check.external_regressions),
        ):
            for finding in findings:
                first = finding.message.splitlines()[0] if finding.message else ""
                yield f"  {scope}: {finding.test_id}: {first}"
        for abuse in check.baseline_abuse:
            yield f"  baseline changed while regressions exist: {abuse.baseline}"


def regressions_report(state: RunState) -> dict[str, Any]:
    """``pact status --json``: the latest check of each promoted item."""
    return {key: check.model_dump(mode="json") for key, check in state.regressions.items()}
