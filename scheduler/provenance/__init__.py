"""Provenance (seed 000, section 6): for any file the fleet produced, which model and
run made it, what it cost, whether it is still what was verified, whether it is still
current, and what a run teaches the next.

The rules:

- **Sidecars** (:mod:`.metadata`). Every promoted work item gets a ``.meta.json``
  sidecar, written atomically right after promotion: the model that answered (as the
  provider reported it), the accepted attempt's tokens and cost, what every attempt of
  the item cost, the run id, the contract version, when it was accepted and the worker
  slot that produced it. ``.pact/.gitignore`` lists them. Rebuild and resume re-create
  missing ones from the log.
- **Baselines and drift** (:mod:`.baseline`). A component's baseline is captured when
  its implementation is promoted with every test passing; drift is measured against it
  by ``pact status`` and ``pact validate``. Contract drift without a test update is an
  error, implementation drift without a contract version bump a warning.
- **Staleness** (:mod:`.staleness`). A component verified longer ago than
  ``staleness_window_days`` (pact.yaml, default 90) is stale; one whose dependencies
  were re-verified after it is aging.
- **Retrospectives** (:mod:`.retrospective`). Every run that ends, completed or failed,
  writes ``.pact/retrospectives/<run_id>.json``; its lessons are specific (the contract
  quality's anti-cliche rules reject vague ones) and later runs of the same project or
  ``pact.yaml`` show them to their code authors (:mod:`.lessons`).

Everything is derived from the audit log and the files on disk; nothing here changes
the run state.
"""

from __future__ import annotations

from scheduler.provenance.baseline import (
    ArtifactBaseline,
    BaselineError,
    capture_baseline,
    read_baseline,
)
from scheduler.provenance.drift import DriftFinding, check_drift, detect_drift, project_drift
from scheduler.provenance.metadata import (
    ArtifactMetadata,
    read_artifact_metadata,
    write_artifact_metadata,
)
from scheduler.provenance.promotion import record_promotion, restore_provenance
from scheduler.provenance.retrospective import (
    RunRetrospective,
    generate_retrospective,
    write_retrospective,
)
from scheduler.provenance.staleness import StalenessCheck, check_staleness

__all__ = [
    "ArtifactBaseline",
    "ArtifactMetadata",
    "BaselineError",
    "DriftFinding",
    "RunRetrospective",
    "StalenessCheck",
    "capture_baseline",
    "check_drift",
    "check_staleness",
    "detect_drift",
    "generate_retrospective",
    "project_drift",
    "read_artifact_metadata",
    "read_baseline",
    "record_promotion",
    "restore_provenance",
    "write_artifact_metadata",
    "write_retrospective",
]
