"""Artifact blobs expire from the fleet's Redis: the TTL, its renewal, and what a run
does about a blob that is gone (fakeredis; the real fleet is in
tests/integration/test_artifact_expiry.py)."""

from __future__ import annotations

from pathlib import Path

import fakeredis
import pytest

from pact_workers.agents.base import AgentOutput, AgentRequest
from pact_workers.artifacts import ArtifactStore, DirectoryBlobStore, MemoryBlobStore, digest_bytes
from pact_workers.errors import InputError
from pact_workers.fleet import keys
from pact_workers.fleet.blobs import RedisBlobStore, artifact_ttl_s
from pact_workers.fleet.tiered import TieredBlobStore
from pact_workers.models.work import ErrorClass, Phase, TaskMessage
from pact_workers.runner import INPUTS_UNAVAILABLE, execute_task
from pact_workers.sandbox.local import LocalSandbox

TTL_S = 600


def ttl(client: fakeredis.FakeRedis, digest: str) -> int:
    return int(client.ttl(keys.artifact(digest)))


def test_the_artifact_ttl_comes_from_the_environment_and_a_bad_value_is_refused() -> None:
    assert artifact_ttl_s({}) == keys.ARTIFACT_TTL_S == 7 * 24 * 3600
    assert artifact_ttl_s({"PACT_ARTIFACT_TTL_S": " 3600 "}) == 3600
    for bad in ("0", "-1", "1.5", "a week"):
        with pytest.raises(InputError, match=rf"PACT_ARTIFACT_TTL_S='{bad}'.*whole number"):
            artifact_ttl_s({"PACT_ARTIFACT_TTL_S": bad})


def test_a_blob_is_written_with_the_ttl_and_every_write_renews_it(
    fake: fakeredis.FakeRedis,
) -> None:
    blobs = RedisBlobStore(fake, ttl_s=TTL_S)
    one = blobs.put_blob(b"one")
    [two] = blobs.put_blobs([b"two"])
    assert 0 < ttl(fake, one) <= TTL_S and 0 < ttl(fake, two) <= TTL_S

    fake.expire(keys.artifact(one), 5)
    fake.set(keys.artifact(two), b"corrupt", ex=5)
    blobs.put_blobs([b"one", b"two"])
    assert ttl(fake, one) > 5 and ttl(fake, two) > 5
    assert blobs.get_blob(two) == b"two"  # a write mends what it renews


def test_put_and_renew_renews_what_redis_has_and_names_what_it_lost(
    fake: fakeredis.FakeRedis,
) -> None:
    blobs = RedisBlobStore(fake, ttl_s=TTL_S)
    kept, lost = blobs.put_blob(b"kept"), blobs.put_blob(b"lost")
    fake.expire(keys.artifact(kept), 5)
    fake.delete(keys.artifact(lost))

    gone = blobs.put_and_renew([b"new"], [kept, lost])

    assert gone == [lost]
    assert ttl(fake, kept) > 5
    assert 0 < ttl(fake, digest_bytes(b"new")) <= TTL_S
    assert not fake.exists(keys.artifact(lost))  # renewing never invents bytes


def test_what_a_task_names_is_renewed_at_the_sync_and_what_redis_lost_is_written_back(
    fake: fakeredis.FakeRedis, tmp_path: Path
) -> None:
    store = ArtifactStore(
        TieredBlobStore(
            DirectoryBlobStore(tmp_path / "artifacts", deferred=True),
            RedisBlobStore(fake, ttl_s=TTL_S),
            deferred=True,
        )
    )
    contract = store.put_bundle({"interface.json": b"{}", "notes.md": b"why"})
    store.sync()
    manifest = store.get_manifest(contract)
    fake.delete(keys.artifact(manifest["notes.md"]))  # expired from Redis
    fake.expire(keys.artifact(contract), 5)  # about to

    store.refresh([contract])
    assert not fake.exists(keys.artifact(manifest["notes.md"]))  # deferred to the sync
    store.sync()

    assert ttl(fake, contract) > 5
    assert 0 < ttl(fake, manifest["notes.md"]) <= TTL_S
    worker = ArtifactStore(RedisBlobStore(fake, ttl_s=TTL_S))
    assert worker.get_bundle(contract) == {"interface.json": b"{}", "notes.md": b"why"}


def test_refreshing_a_store_without_a_remote_tier_reads_and_writes_nothing(
    tmp_path: Path,
) -> None:
    store = ArtifactStore(DirectoryBlobStore(tmp_path))
    store.refresh(["sha256:" + "0" * 64])  # not even there: a local store has no TTL


def test_lost_names_the_blobs_of_a_bundle_the_store_cannot_give(
    fake: fakeredis.FakeRedis, tmp_path: Path
) -> None:
    worker = ArtifactStore(RedisBlobStore(fake, ttl_s=TTL_S))
    output = worker.put_bundle({"src/a.py": b"a = 1\n", "src/b.py": b"b = 2\n"})
    scheduler = ArtifactStore(
        TieredBlobStore(DirectoryBlobStore(tmp_path), RedisBlobStore(fake, ttl_s=TTL_S))
    )
    assert scheduler.lost(output) == []
    assert scheduler.get_bundle(output)["src/a.py"] == b"a = 1\n"  # fetched on the way

    other = worker.put_bundle({"src/c.py": b"c = 3\n", "src/d.py": b"d = 4\n"})
    d_digest = worker.get_manifest(other)["src/d.py"]
    fake.delete(keys.artifact(d_digest))
    assert scheduler.lost(other) == [d_digest]

    fake.delete(keys.artifact(other))
    fresh = ArtifactStore(
        TieredBlobStore(DirectoryBlobStore(tmp_path / "b"), RedisBlobStore(fake, ttl_s=TTL_S))
    )
    assert fresh.lost(other) == [other]  # the manifest itself is gone


class _Answers:
    name = "fixed"

    def produce(self, request: AgentRequest) -> AgentOutput:
        raise AssertionError("the agent must not run without its inputs")


def test_an_attempt_whose_inputs_are_gone_fails_as_transient_without_asking_the_agent() -> None:
    store = ArtifactStore(MemoryBlobStore())
    task = TaskMessage(
        run_id="r1",
        component_id="adder",
        phase=Phase.TEST,
        attempt=1,
        inputs={"contract": "sha256:" + "1" * 64},
    )
    result = execute_task(task, agent=_Answers(), sandbox=LocalSandbox(), store=store)
    assert (result.outcome, result.error_class, result.error_type) == (
        "error",
        ErrorClass.TRANSIENT,
        INPUTS_UNAVAILABLE,
    )
    assert result.error is not None and "inputs could not be read" in result.error


class _Flaky(RedisBlobStore):
    """A Redis store whose first write fails, as Redis gone past the client's retries."""

    failures = 1

    def put_and_renew(self, blobs: list[bytes], renew: list[str]) -> list[str]:
        if self.failures:
            self.failures -= 1
            raise ConnectionError("Redis is gone")
        return super().put_and_renew(blobs, renew)


def test_a_sync_that_could_not_reach_redis_leaves_its_writes_and_renewals_to_the_next(
    fake: fakeredis.FakeRedis, tmp_path: Path
) -> None:
    local = DirectoryBlobStore(tmp_path / "artifacts", deferred=True)
    store = ArtifactStore(TieredBlobStore(local, RedisBlobStore(fake, ttl_s=TTL_S)))
    contract = store.put_bundle({"interface.json": b"{}"})
    fake.expire(keys.artifact(contract), 5)
    flaky = ArtifactStore(TieredBlobStore(local, _Flaky(fake, ttl_s=TTL_S), deferred=True))
    spec = flaky.put_bundle({"spec.json": b"{}"})
    flaky.refresh([contract])

    with pytest.raises(ConnectionError):
        flaky.sync()
    assert not fake.exists(keys.artifact(spec))
    flaky.sync()

    assert 0 < ttl(fake, spec) <= TTL_S and ttl(fake, contract) > 5


def test_a_failed_attempts_corrupt_files_are_named_as_unreadable_not_gone(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The next attempt's prompt shows a failed attempt's files where the store still
    has them; a blob that reads corrupt is reported as such (it was called 'gone')."""
    from pact_workers.models.work import FailureNote
    from pact_workers.runner import _previous_outputs

    digest = ArtifactStore(DirectoryBlobStore(tmp_path)).put_bundle({"a.py": b"x = 1\n"})
    hexd = digest_bytes(b"x = 1\n").removeprefix("sha256:")
    (tmp_path / hexd[:2] / hexd).write_bytes(b"x = 2\n")  # a flipped byte
    task = TaskMessage(
        run_id="r",
        component_id="c",
        phase=Phase.IMPLEMENT,
        attempt=2,
        feedback=[FailureNote(attempt=1, summary="tests failed", output=digest)],
    )
    with caplog.at_level("WARNING"):
        assert _previous_outputs(task, ArtifactStore(DirectoryBlobStore(tmp_path))) == {}
    [record] = [r for r in caplog.records if "attempt 1's files" in r.getMessage()]
    assert "corrupt" in record.getMessage() and "gone" not in record.getMessage()
