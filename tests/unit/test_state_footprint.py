"""What keeps a large run's state small and quick to read: shared defaults, interned
gate records, bundles assembled from manifests, and the pieces that write and read
state.json without waste."""

from __future__ import annotations

import gc
import os
from pathlib import Path, PurePosixPath

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from pact_workers.artifacts import ArtifactStore, DirectoryBlobStore, MemoryBlobStore
from pact_workers.errors import ArtifactError
from pact_workers.files import atomic_write, new_directory, write_file
from pact_workers.fleet.tiered import TieredBlobStore
from pact_workers.gcpause import collector_paused
from pact_workers.models.work import NO_USAGE, Phase, Usage
from pact_workers.sandbox.base import safe_relpath
from scheduler.gates.dimensions import Dimensions, GateRecord
from scheduler.gates.item import NO_GATES, ItemGates, open_gates
from scheduler.gates.scorer import gates_for_score
from scheduler.gates.transitions import gate_dispatched
from scheduler.snapshot import parse_state_json
from scheduler.state import ItemState, RunState, item_key


def _record(risk: int = 3) -> GateRecord:
    dims = Dimensions(novelty=2, scope=1, uncertainty=1, risk=risk)
    return GateRecord(
        dimensions=dims,
        score=dims.score,
        gates=gates_for_score(dims.score),
        mode="advisory",
        reasons={"risk": "because"},
    )


def test_items_share_their_empty_usages_and_untouched_gates() -> None:
    a = ItemState(component_id="a", phase=Phase.CONTRACT)
    b = ItemState.model_validate({"component_id": "b", "phase": "test"})
    assert a.gates is NO_GATES and b.gates is NO_GATES
    assert a.usage is NO_USAGE and b.accepted_usage is NO_USAGE and b.saved is NO_USAGE


def test_the_shared_gates_cannot_be_written_and_open_gates_gives_an_item_its_own() -> None:
    item = ItemState(component_id="a", phase=Phase.IMPLEMENT)
    with pytest.raises(ValidationError):
        item.gates.state = "active"
    own = open_gates(item)
    own.state = "active"
    assert item.gates is own and type(own) is ItemGates
    assert NO_GATES.state == ""
    assert ItemState(component_id="b", phase=Phase.IMPLEMENT).gates.state == ""


def test_a_dispatch_without_a_record_leaves_the_item_on_the_shared_gates() -> None:
    contract = ItemState(component_id="a", phase=Phase.CONTRACT)
    gate_dispatched(contract, _record(), "work")  # records are kept for gated phases only
    assert contract.gates is NO_GATES
    implement = ItemState(component_id="a", phase=Phase.IMPLEMENT)
    gate_dispatched(implement, _record(), "work")
    assert implement.gates is not NO_GATES
    assert implement.gates.record is not None and implement.gates.record.reasons == {}


def test_gate_records_read_back_from_a_snapshot_are_one_object_per_value() -> None:
    state = RunState(run_id="r")
    for i in range(4):
        item = ItemState(component_id=f"c{i}", phase=Phase.IMPLEMENT)
        gate_dispatched(item, _record(risk=3 if i < 3 else 4), "work")
        state.items[item_key(item.component_id, item.phase)] = item
    body = state.model_dump_json(exclude_defaults=True).encode()
    read = parse_state_json(body).state
    records = [read.items[f"c{i}/implement"].gates.record for i in range(4)]
    assert records[0] is records[1] is records[2]
    assert records[3] is not records[0] and records[3] == _record(4).model_copy(
        update={"reasons": {}}
    )
    # Items without gates read back onto the shared defaults, and serialise to nothing.
    plain = ItemState(component_id="p", phase=Phase.TEST)
    state.items["p/test"] = plain
    again = parse_state_json(state.model_dump_json(exclude_defaults=True).encode()).state
    assert again.items["p/test"].gates is NO_GATES
    assert "gates" not in plain.model_dump(exclude_defaults=True)


def test_a_bundle_from_a_manifest_is_named_as_the_same_files_stored_whole(
    tmp_path: Path,
) -> None:
    store = ArtifactStore(DirectoryBlobStore(tmp_path / "blobs"))
    first = store.put_bundle({"src/a.py": b"a = 1\n"})
    second = store.put_bundle({"src/b.py": b"b = 2\n", "src/c.py": b"c = 3\n"})
    merged = {**store.get_manifest(first), **store.get_manifest(second)}
    name = store.put_manifest(merged)
    whole = {"src/a.py": b"a = 1\n", "src/b.py": b"b = 2\n", "src/c.py": b"c = 3\n"}
    assert name == ArtifactStore(MemoryBlobStore()).put_bundle(whole)
    assert store.get_bundle(name) == whole


def test_a_manifest_naming_a_blob_the_store_lacks_is_refused(tmp_path: Path) -> None:
    store = ArtifactStore(DirectoryBlobStore(tmp_path / "blobs"))
    absent = "sha256:" + "0" * 64
    with pytest.raises(ArtifactError, match="not in the store"):
        store.put_manifest({"src/a.py": absent})
    with pytest.raises(ArtifactError, match="'..'"):
        store.put_manifest({"../a.py": store.blobs.put_blob(b"x")})


def test_a_tier_that_lost_its_blobs_gets_them_again_with_a_manifest(tmp_path: Path) -> None:
    local, remote = DirectoryBlobStore(tmp_path / "local"), MemoryBlobStore()
    store = ArtifactStore(TieredBlobStore(local, remote))
    part = store.put_bundle({"src/a.py": b"a = 1\n"})
    remote._blobs.clear()  # the fleet's Redis restarted without its data
    name = store.put_manifest(store.get_manifest(part))
    assert ArtifactStore(remote).get_bundle(name) == {"src/a.py": b"a = 1\n"}


def test_atomic_write_replaces_whole_files_from_pieces_and_leaves_no_temporary(
    tmp_path: Path,
) -> None:
    target = tmp_path / "deep" / "er" / "state.json"
    atomic_write(target, [b"{", b'"a":1', b"}"])
    assert target.read_bytes() == b'{"a":1}'
    atomic_write(str(target), b"{}", fsync=False)
    assert target.read_bytes() == b"{}"
    assert oct(target.stat().st_mode & 0o777) == oct(0o600)
    assert sorted(os.listdir(target.parent)) == ["state.json"]


def test_atomic_write_that_fails_leaves_the_old_file_and_no_temporary(tmp_path: Path) -> None:
    target = tmp_path / "f"
    target.write_bytes(b"old")

    with pytest.raises(TypeError):
        atomic_write(target, [b"new", 3])  # type: ignore[list-item]
    assert target.read_bytes() == b"old"
    assert sorted(os.listdir(tmp_path)) == ["f"]


def test_new_directories_are_owner_only_distinct_and_skip_a_leftovers_name(
    tmp_path: Path,
) -> None:
    first = new_directory(str(tmp_path), ".src.new-")
    second = new_directory(str(tmp_path), ".src.new-")
    assert first != second
    assert all(os.path.basename(d).startswith(f".src.new-{os.getpid()}.") for d in (first, second))
    assert oct(os.stat(first).st_mode & 0o777) == oct(0o700)
    # An earlier process with the same pid left the next name behind: it is skipped.
    serial = int(second.rsplit(".", 1)[1])
    os.mkdir(tmp_path / f".src.new-{os.getpid()}.{serial + 1}")
    assert new_directory(str(tmp_path), ".src.new-").endswith(
        f".src.new-{os.getpid()}.{serial + 2}"
    )


def test_write_file_creates_or_truncates(tmp_path: Path) -> None:
    target = str(tmp_path / "x.py")
    write_file(target, b"a much longer first version\n")
    write_file(target, b"short\n")
    assert Path(target).read_bytes() == b"short\n"


def test_blobs_known_to_the_store_are_bounded(tmp_path: Path) -> None:
    blobs = DirectoryBlobStore(tmp_path / "blobs", deferred=True)
    blobs.KNOWN = 8
    for i in range(20):
        blobs.put_blob(str(i).encode())
    assert len(blobs._known) <= 8
    assert all(blobs.has_blob(blobs.put_blob(str(i).encode())) for i in range(20))


def test_a_blob_cut_short_on_disk_is_written_again_when_stored(tmp_path: Path) -> None:
    """A blob written without its own fsync and cut short by a power loss (whole
    blobs are only promised after ``sync``) is mended when the same bytes are stored
    again, as a re-run of the lost work does, instead of staying corrupt."""
    blobs = DirectoryBlobStore(tmp_path / "blobs", deferred=True)
    digest = blobs.put_blob(b"the verified output\n")
    path = Path(blobs._path(digest))
    path.write_bytes(b"")  # what a power loss can leave of it
    again = DirectoryBlobStore(tmp_path / "blobs", deferred=True)  # the next process
    with pytest.raises(ArtifactError, match="corrupt"):
        again.get_blob(digest)
    assert again.put_blob(b"the verified output\n") == digest
    assert again.get_blob(digest) == b"the verified output\n"
    assert path.read_bytes() == b"the verified output\n"


def test_a_blob_corrupt_on_disk_at_its_full_size_is_written_again_when_stored(
    tmp_path: Path,
) -> None:
    """A bit flipped on disk keeps the file's size: storing the same bytes again (a
    resume rebuilding an attempt's inputs) checks the copy it finds and mends it."""
    blobs = DirectoryBlobStore(tmp_path / "blobs")
    digest = blobs.put_blob(b"the inputs of an attempt\n")
    path = Path(blobs._path(digest))
    path.write_bytes(b"THE inputs of an attempt\n")
    again = DirectoryBlobStore(tmp_path / "blobs")  # the next process
    assert again.put_blob(b"the inputs of an attempt\n") == digest
    assert path.read_bytes() == b"the inputs of an attempt\n"
    assert DirectoryBlobStore(tmp_path / "blobs").get_blob(digest) == path.read_bytes()


def test_blobs_stored_or_read_last_are_served_from_memory_within_their_bound(
    tmp_path: Path,
) -> None:
    """A run reads back what it has just stored: those reads cost no file, up to the
    store's bound in bytes; a blob past it, or too large to keep, is read from disk."""
    blobs = DirectoryBlobStore(tmp_path / "blobs", deferred=True)
    blobs.RECENT_BYTES = 1024
    first = blobs.put_blob(b"a" * 100)
    os.unlink(blobs._path(first))
    assert blobs.get_blob(first) == b"a" * 100  # no file needed
    large = blobs.put_blob(b"L" * 200)  # over an eighth of the bound: not kept
    os.unlink(blobs._path(large))
    with pytest.raises(ArtifactError, match="not in the store"):
        blobs.get_blob(large)
    for n in range(10):  # 1,000 bytes more: the first goes
        blobs.put_blob(bytes([n]) * 100)
    with pytest.raises(ArtifactError, match="not in the store"):
        blobs.get_blob(first)
    assert blobs._recent_bytes <= 1024

    reader = DirectoryBlobStore(tmp_path / "blobs")  # another process's store
    last = blobs.put_blob(b"z" * 100)
    assert reader.get_blob(last) == b"z" * 100  # read from its file, hashed
    os.unlink(reader._path(last))
    assert reader.get_blob(last) == b"z" * 100


_PART = st.sampled_from(["a", "b.py", ".", "..", "", "...", ".x", "src"])


@given(st.lists(_PART, min_size=1, max_size=5))
def test_safe_relpath_normalises_or_refuses_as_the_path_rules_say(parts: list[str]) -> None:
    path = "/".join(parts)
    pure = PurePosixPath(path) if path else None
    try:
        got = safe_relpath(path)
    except ArtifactError:
        assert (
            not path
            or pure is None
            or pure.is_absolute()
            or ".." in pure.parts
            or not [p for p in pure.parts if p != "."]
        )
        return
    assert pure is not None and not pure.is_absolute() and ".." not in pure.parts
    assert got == "/".join(p for p in pure.parts if p != ".")


def test_the_collector_is_paused_only_inside_and_its_state_restored() -> None:
    assert gc.isenabled()
    with collector_paused():
        assert not gc.isenabled()
    assert gc.isenabled()
    with pytest.raises(RuntimeError), collector_paused():
        raise RuntimeError("boom")
    assert gc.isenabled()
    gc.disable()
    try:
        with collector_paused():
            pass
        assert not gc.isenabled()  # it was off before: left off
    finally:
        gc.enable()


def test_usage_sums_never_change_the_shared_nothing() -> None:
    total = NO_USAGE + Usage(input_tokens=3, cost_usd=0.5)
    assert total.input_tokens == 3 and Usage() == NO_USAGE


def test_the_lessons_store_keeps_the_newest_runs_lessons_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every run opens the store: it holds each run's lessons (not its retrospective)
    and only the newest KEPT_RUNS runs per key."""
    import json
    import time

    from scheduler.provenance import lessons as store
    from scheduler.provenance.retrospective import RunRetrospective

    monkeypatch.setenv("PACT_CACHE_DIR", str(tmp_path / "cache"))
    directory = store.lessons_dir("k")
    directory.mkdir(parents=True)
    # A store written before: a whole retrospective, still read for its lessons.
    (directory / "old.json").write_text(
        json.dumps({"run_id": "old", "generated_at": "2026-01-01T00:00:00", "lessons": ["l-old"]})
    )
    (directory / "junk.json").write_text("[1, 2]")
    for i in range(store.KEPT_RUNS + 5):
        retro = RunRetrospective(
            run_id=f"r{i:02d}",
            generated_at=f"2026-02-{i + 1:02d}T00:00:00",
            lessons=[f"l{i:02d}"],
            total_cost=0.0,
            total_duration_seconds=0.0,
            components_count=1,
            plan_revisions=0,
            largest_test_suite=("c", 1),
            most_error_cases=("c", 0),
            cost_distribution={"c": 0.0},
        )
        store.publish(retro, "k")
        time.sleep(0.002)
    kept = sorted(p.name for p in directory.glob("*.json"))
    assert len(kept) == store.KEPT_RUNS
    assert kept[-1] == f"r{store.KEPT_RUNS + 4:02d}.json" and "old.json" not in kept
    record = json.loads((directory / kept[-1]).read_bytes())
    assert set(record) == {"run_id", "generated_at", "lessons"}
    carried = store.prior_lessons(tmp_path / "project", "k")
    assert carried[0] == f"l{store.KEPT_RUNS + 4:02d}" and len(carried) == store.MAX_CARRIED


def test_the_manifest_cache_is_bounded_by_paths_and_keeps_small_manifests() -> None:
    """Bounded by the paths it holds: many one-file manifests stay (the outputs a large
    run's closures read again and again); the least recently used go first; a merged
    manifest too large to be worth keeping is parsed but not cached."""
    store = ArtifactStore(MemoryBlobStore())
    store.MANIFEST_CACHE_PATHS = 64
    small = [store.put_bundle({f"src/m{i}.py": str(i).encode()}) for i in range(40)]
    for digest in small:
        store.get_manifest(digest)
    assert store._cached_paths <= 64
    kept = [d for d in small if d in store._manifests]
    assert kept == small[-32:]  # two paths each (file + manifest): the newest 32
    big = store.put_bundle({f"src/b{i}.py": str(i).encode() for i in range(20)})
    assert len(store.get_manifest(big)) == 20
    assert big not in store._manifests and [d for d in small if d in store._manifests] == kept
    # Every cached path is counted once, however often it is read.
    store.get_manifest(kept[0])
    assert store._cached_paths == sum(len(m) + 1 for m in store._manifests.values())
