"""Regression attribution and the patch contract (seed 001, scope-aware verification).

Rules:

- :func:`compare_runs` compares a before-run with an after-run of the same tests: a
  test that passed before and fails after is a regression, one finding each, with
  the file paths its traceback names.
- An *intent* says what a change may touch: ``allowed_files`` (in this system, the
  files of the component an attempt implements) and ``allowed_related`` (for an
  integration, its children's public interfaces). Findings whose paths match the
  intent (``fnmatchcase``) are *intent regressions*; findings whose paths all lie
  outside it are *external*. A finding with no path is counted as intent (no false
  accept). Without an intent, every regression is intent.
- :func:`gate_worsened` is true only when the gate passed before and fails after; a
  gate already failing is not the change's doing. A worsened gate is the intent's
  when intent regressions or intent-scope worsened metrics triggered it.
- :func:`check_patch_contract` gives one of five statuses (``accepted``,
  ``accepted_with_external_changes``, ``violated``, ``unverified``, ``expired``)
  by the seed's decision table (:mod:`scheduler.regression.contract`). ``check`` mode
  is the scope check alone (exact membership); ``verify`` adds the attribution.
- :func:`detect_baseline_abuse` is workspace-global: a stored baseline changed while
  any regression exists, intent or external, is suspicious.
- Pure: no I/O. :mod:`scheduler.regression.promotion` runs the before/after at
  promotion and acts on the verdict.
"""

from __future__ import annotations

from scheduler.regression.baseline import BaselineAbuse, detect_baseline_abuse
from scheduler.regression.compare import Finding, compare_runs, paths_in
from scheduler.regression.contract import (
    Gate,
    Intent,
    PatchStatus,
    PatchVerdict,
    check_patch_contract,
    gate_worsened,
    partition,
)

__all__ = [
    "BaselineAbuse",
    "Finding",
    "Gate",
    "Intent",
    "PatchStatus",
    "PatchVerdict",
    "check_patch_contract",
    "compare_runs",
    "detect_baseline_abuse",
    "gate_worsened",
    "partition",
    "paths_in",
]
