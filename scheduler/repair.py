"""Mending a run's verified outputs from the project's promoted copies.

A done item's verified output is a bundle in the artifact store: a manifest blob and a
blob per file. A resume reads them again (a dependent's inputs, a baseline), so a blob
that went missing or reads corrupt on disk would fail work that did nothing wrong. The
promoted files in the project are copies of those bytes: a copy that hashes to the
digest the store lost *is* the blob, and a manifest rebuilt from the copies that hashes
to the output's name *is* the manifest. Content addressing makes the mend verifiable;
nothing unverified is written.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from pact_workers.artifacts import ArtifactStore, digest_bytes, manifest_bytes
from pact_workers.errors import ArtifactError
from pact_workers.models.work import ItemStatus, Phase
from scheduler.project import ProjectDir
from scheduler.state import RunState, item_key


@dataclass
class Mend:
    """What :func:`mend_from_project` found: blobs it can write again (digest -> bytes,
    each checked against its digest) and the outputs it cannot restore."""

    blobs: dict[str, bytes] = field(default_factory=dict)
    lost: list[str] = field(default_factory=list)

    def write(self, store: ArtifactStore) -> None:
        """Write the mended blobs over what the store holds (a corrupt file may have
        the right size, so a plain store would keep it)."""
        mend = getattr(store.blobs, "mend_blob", store.blobs.put_blob)
        for data in self.blobs.values():
            mend(data)


def mend_from_project(state: RunState, project: ProjectDir, store: ArtifactStore) -> Mend:
    """Read every blob of every done, promoted item's output; for each that is missing
    or corrupt, find its bytes in the promoted copy (read only then, so an intact run
    costs one read and hash per blob). Writes nothing: see :meth:`Mend.write`."""
    found = Mend()
    for item in state.items.values():
        if item.status is not ItemStatus.DONE or item.output is None or not item.promoted:
            continue
        cid, phase = item.component_id, item.phase
        key = item_key(cid, phase)
        try:
            manifest = store.get_manifest(item.output)
        except ArtifactError:
            manifest = {rel: digest_bytes(_copy(project, cid, phase, rel)) for rel in item.files}
            doc = manifest_bytes(manifest)
            if not item.files or digest_bytes(doc) != item.output:
                copies = ", ".join(
                    os.path.relpath(project.promoted_path(cid, phase, rel), project.root)
                    for rel in item.files
                )
                found.lost.append(
                    f"{key}: the manifest of its output {item.output}, which its promoted "
                    f"copies ({copies or 'none'}) no longer hash to"
                )
                continue
            found.blobs[item.output] = doc
        for rel, digest in manifest.items():
            if digest in found.blobs:
                continue
            try:
                store.blobs.get_blob(digest)
                continue
            except ArtifactError:
                pass
            data = _copy(project, cid, phase, rel)
            if digest_bytes(data) == digest:
                found.blobs[digest] = data
            else:
                where = os.path.relpath(project.promoted_path(cid, phase, rel), project.root)
                found.lost.append(f"{key}: {rel} ({digest}; its copy {where} differs)")
    return found


def _copy(project: ProjectDir, component_id: str, phase: Phase, rel: str) -> bytes:
    """The promoted copy of an output's file ``rel`` (empty when it cannot be read)."""
    try:
        with open(project.promoted_path(component_id, phase, rel), "rb") as fh:
            return fh.read()
    except OSError:
        return b""
