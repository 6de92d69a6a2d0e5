"""A scheduler's local copy of a blob that reads corrupt (a bit flipped on disk, a
file cut short) is written again from the fleet's Redis when Redis has a good copy,
and refused, naming both tiers, when it has not (fakeredis; a fleet run that goes on
over a mended copy is in tests/integration/test_artifact_repair.py)."""

from __future__ import annotations

from pathlib import Path

import fakeredis
import pytest

from pact_workers.artifacts import ArtifactStore, DirectoryBlobStore, digest_bytes
from pact_workers.errors import CorruptArtifact
from pact_workers.fleet import keys
from pact_workers.fleet.blobs import RedisBlobStore
from pact_workers.fleet.tiered import TieredBlobStore


def flip_first_byte(root: Path, digest: str) -> Path:
    """Corrupt the local copy in place, its size unchanged."""
    hexd = digest.removeprefix("sha256:")
    path = root / hexd[:2] / hexd
    data = bytearray(path.read_bytes())
    data[0] ^= 0x01
    path.write_bytes(bytes(data))
    return path


def tiered(root: Path, client: fakeredis.FakeRedis) -> TieredBlobStore:
    return TieredBlobStore(DirectoryBlobStore(root), RedisBlobStore(client))


def test_a_local_copy_that_reads_corrupt_is_written_again_from_redis(
    fake: fakeredis.FakeRedis, tmp_path: Path
) -> None:
    root = tmp_path / "artifacts"
    store = ArtifactStore(tiered(root, fake))
    files = {"src/lexer.py": b"def lex(text):\n    return text.split()\n", "notes.md": b"why"}
    bundle = store.put_bundle(files)
    lexer = store.get_manifest(bundle)["src/lexer.py"]
    path = flip_first_byte(root, lexer)
    with pytest.raises(CorruptArtifact, match="corrupt on disk"):
        DirectoryBlobStore(root).get_blob(lexer)

    # Read through a fresh store, as a scheduler that adopts the run would.
    assert ArtifactStore(tiered(root, fake)).get_bundle(bundle) == files
    assert digest_bytes(path.read_bytes()) == lexer  # mended on disk, same size and all
    assert DirectoryBlobStore(root).get_blob(lexer) == files["src/lexer.py"]

    flip_first_byte(root, lexer)
    assert tiered(root, fake).get_blob(lexer) == files["src/lexer.py"]
    assert digest_bytes(path.read_bytes()) == lexer


def test_a_corrupt_local_copy_redis_has_lost_is_refused_naming_both_tiers(
    fake: fakeredis.FakeRedis, tmp_path: Path
) -> None:
    root = tmp_path / "artifacts"
    blobs = tiered(root, fake)
    digest = blobs.put_blob(b"the only copy")
    fake.delete(keys.artifact(digest))
    path = flip_first_byte(root, digest)

    for read in (
        lambda store: store.get_blob(digest),
        lambda store: store.get_blobs([digest]),
        # Renewing a blob Redis lost writes it again from the local copy.
        lambda store: store.refresh_blobs([digest]),
    ):
        with pytest.raises(CorruptArtifact) as refused:
            read(tiered(root, fake))
        assert "corrupt on disk" in str(refused.value)
        assert "Redis has no good copy" in str(refused.value)
        assert "missing from the Redis artifact store" in str(refused.value)
    assert digest_bytes(path.read_bytes()) != digest  # nothing invented
    assert not fake.exists(keys.artifact(digest))
