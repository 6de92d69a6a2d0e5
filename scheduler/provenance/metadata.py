"""Artifact metadata: the ``.meta.json`` sidecar beside every promoted artifact (6.1).

One sidecar per promoted work item: the contract ``interface.json`` gets
``interface.meta.json``, the test suite directory ``tests/`` gets ``tests.meta.json``,
an implementation's or composition's ``src/`` gets ``src.meta.json`` (the seed's
``artifact_path.with_suffix('.meta.json')``). A directory's sidecar names every file it
covers, so each file has exactly one sidecar and each attempt's cost is counted once.
"""

from __future__ import annotations

import json
from functools import cache
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from pact_workers.files import atomic_write
from pact_workers.models.work import Phase

ArtifactType = Literal["contract", "test_suite", "implementation", "composition"]

#: The artifact type each phase promotes.
ARTIFACT_TYPES: dict[Phase, ArtifactType] = {
    Phase.CONTRACT: "contract",
    Phase.TEST: "test_suite",
    Phase.IMPLEMENT: "implementation",
    Phase.INTEGRATE: "composition",
}

SIDECAR_SUFFIX = ".meta.json"


@cache
def pact_version() -> str:
    """The installed pact-fleet's version (``unknown`` when run from a bare checkout);
    read once per process (package metadata is parsed on every lookup)."""
    try:
        return version("pact-fleet")
    except PackageNotFoundError:
        return "unknown"


class ArtifactMetadata(BaseModel):
    """Provenance metadata for a generated artifact."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    pact_version: str
    model: str = Field(description="Model ID that generated this artifact")
    component_id: str
    artifact_type: ArtifactType
    contract_version: int = 1
    cost_input_tokens: int = 0
    cost_output_tokens: int = 0
    cost_usd: float = 0.0
    timestamp: str = Field(description="ISO 8601 generation timestamp")
    run_id: str = Field(description="Unique run identifier")
    #: The worker slot (``host/slot``) whose attempt was accepted.
    worker: str = ""
    #: The accepted attempt's number, and what every attempt of this work item cost,
    #: rejected ones included (the sum over a run's sidecars is the run's spend).
    attempt: int = 1
    item_cost_usd: float = 0.0
    #: Project-relative paths of the files this sidecar covers.
    files: list[str] = Field(default_factory=list)


def sidecar_path(artifact_path: Path) -> Path:
    """Where the sidecar of ``artifact_path`` lives (a file or a directory)."""
    return artifact_path.with_suffix(SIDECAR_SUFFIX)


def write_artifact_metadata(artifact_path: Path, metadata: ArtifactMetadata) -> None:
    """Write the sidecar of ``artifact_path`` atomically (whole or absent, never partial).

    Not fsynced: a sidecar lost with the machine is re-made from the log on resume or
    rebuild, and the run's own durability (one sync per commit) is not slowed by it.
    """
    data = metadata.model_dump_json(indent=2).encode() + b"\n"
    atomic_write(sidecar_path(artifact_path), data, fsync=False)


def read_artifact_metadata(artifact_path: Path) -> ArtifactMetadata | None:
    """The sidecar of ``artifact_path``; None when there is none or it cannot be read."""
    path = sidecar_path(artifact_path)
    try:
        return ArtifactMetadata.model_validate(json.loads(path.read_bytes()))
    except (OSError, ValueError, ValidationError):
        return None
