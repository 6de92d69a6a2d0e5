"""What a run imported from a Pact project: ``.pact/import.json`` in the run's directory.

The manifest names, per (component, phase), the digest of the bundle Pact produced
(its files are in the run's artifact store) and where it came from. It is written
once, when ``pact import`` starts the run, and read whenever the run is driven (a
resume included), so an imported artifact not yet verified is offered again.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from pact_workers.errors import RunDirError
from pact_workers.models.work import Phase

__all__ = ["IMPORT_MANIFEST", "IMPORT_ORIGIN", "ImportManifest", "read_manifest", "write_manifest"]

IMPORT_MANIFEST = "import.json"
#: ``source_run`` of an imported artifact's cache hit starts with this.
IMPORT_ORIGIN = "pact-import:"


class ImportedArtifact(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    component_id: str
    phase: Phase
    #: Digest of the bundle in the run's artifact store.
    output: str
    #: The Pact file or directory it was read from.
    source: str


class ImportManifest(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    #: The Pact project's ``.pact/`` directory.
    pact_dir: str
    artifacts: list[ImportedArtifact] = Field(default_factory=list)

    @property
    def origin(self) -> str:
        return f"{IMPORT_ORIGIN}{self.pact_dir}"

    def by_item(self) -> dict[tuple[str, Phase], ImportedArtifact]:
        return {(a.component_id, a.phase): a for a in self.artifacts}


def manifest_path(pact: Path) -> Path:
    return pact / IMPORT_MANIFEST


def write_manifest(pact: Path, manifest: ImportManifest) -> None:
    """Write the manifest atomically (temp file, fsync, rename)."""
    path = manifest_path(pact)
    tmp = path.with_suffix(".json.tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(manifest.model_dump_json(indent=2))
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def read_manifest(pact: Path) -> ImportManifest | None:
    """The run's import manifest, or None when the run imported nothing.

    Raises:
        RunDirError: the manifest exists but cannot be read.
    """
    path = manifest_path(pact)
    if not path.is_file():
        return None
    try:
        return ImportManifest.model_validate(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, ValidationError) as exc:
        raise RunDirError(f"{path}: the run's import manifest is unreadable: {exc}") from None
