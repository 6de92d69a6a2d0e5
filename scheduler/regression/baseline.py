"""Baseline hygiene (seed 001): a baseline changed while regressions exist is suspicious."""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict

from scheduler.regression.compare import Finding


class BaselineAbuse(BaseModel):
    """A stored baseline that changed while regressions existed."""

    model_config = ConfigDict(frozen=True)

    baseline: str
    before_digest: str
    after_digest: str
    regressions: tuple[str, ...]


def detect_baseline_abuse(
    baseline: str,
    before_digest: str,
    after_digest: str,
    regressions: Sequence[Finding],
) -> BaselineAbuse | None:
    """Flag ``baseline`` when its digest changed while any regression exists.

    Workspace-global on purpose: whose regressions they are (intent or external) does
    not matter; updating the baseline to hide them is what is flagged.
    """
    if not regressions or before_digest == after_digest:
        return None
    return BaselineAbuse(
        baseline=baseline,
        before_digest=before_digest,
        after_digest=after_digest,
        regressions=tuple(f.test_id for f in regressions),
    )
