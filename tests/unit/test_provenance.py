"""Provenance (seed 000, section 6): sidecars, baselines and drift, staleness,
retrospectives."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from pact_workers.agents.base import AgentRequest
from pact_workers.agents.context import build_code_agent_context
from pact_workers.agents.roles import render_prompt
from pact_workers.models.contract import ComponentContract
from pact_workers.models.testing import ContractTestSuite, TestResults
from pact_workers.models.work import ErrorClass, Phase, Role, Usage
from scheduler.events import ItemDispatched, ItemFailed, ItemSucceeded
from scheduler.interview.recorded import InterviewRecorded
from scheduler.provenance import (
    ArtifactMetadata,
    BaselineError,
    capture_baseline,
    check_drift,
    detect_drift,
    read_artifact_metadata,
    write_artifact_metadata,
)
from scheduler.provenance import baseline as baseline_module
from scheduler.provenance import drift as drift_module
from scheduler.provenance.baseline import (
    ArtifactBaseline,
    baseline_from_verified,
    hash_files,
    hash_tree,
    untouched,
)
from scheduler.provenance.lessons import lessons_key, prior_lessons, publish
from scheduler.provenance.promotion import GITIGNORE, ensure_gitignore, restore_provenance
from scheduler.provenance.retrospective import (
    generate_retrospective,
    is_vague,
    specific_lessons,
    write_retrospective,
)
from scheduler.provenance.staleness import check_staleness
from scheduler.rebuild import rebuild_state
from scheduler.settings import Settings
from tests.runs import RunBuilder, star_tree

NOW = datetime(2026, 6, 1, tzinfo=UTC)


def metadata(**fields: object) -> ArtifactMetadata:
    base: dict[str, object] = {
        "pact_version": "0.1.0",
        "model": "claude-sonnet-4-5-20250929",
        "component_id": "lexer",
        "artifact_type": "implementation",
        "cost_input_tokens": 1200,
        "cost_output_tokens": 300,
        "cost_usd": 0.0081,
        "timestamp": "2026-05-01T10:00:00+00:00",
        "run_id": "r1",
        "worker": "host-a/pid42",
    }
    return ArtifactMetadata.model_validate({**base, **fields})


def test_metadata_roundtrip(tmp_path: Path) -> None:
    artifact = tmp_path / "interface.json"
    artifact.write_text("{}")
    written = metadata(files=["interface.json"], contract_version=3)
    write_artifact_metadata(artifact, written)
    assert (tmp_path / "interface.meta.json").is_file()
    assert read_artifact_metadata(artifact) == written


def test_a_missing_or_corrupt_sidecar_reads_as_none(tmp_path: Path) -> None:
    artifact = tmp_path / "src"
    assert read_artifact_metadata(artifact) is None
    (tmp_path / "src.meta.json").write_text('{"model": 1')
    assert read_artifact_metadata(artifact) is None


def test_sidecars_are_written_whole_and_leave_no_temporary_file(tmp_path: Path) -> None:
    artifact = tmp_path / "tests"
    for cost in (0.1, 0.2, 0.3):
        write_artifact_metadata(artifact, metadata(cost_usd=cost))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tests.meta.json"]
    assert json.loads((tmp_path / "tests.meta.json").read_text())["cost_usd"] == 0.3


def test_the_gitignore_lists_sidecars_once_and_keeps_what_was_there(tmp_path: Path) -> None:
    project = RunBuilder(tmp_path, star_tree(1)).close()
    ignore = project.pact / ".gitignore"
    ignore.write_text("state.json")
    ensure_gitignore(project)
    ensure_gitignore(project)
    assert ignore.read_text() == "state.json\n" + GITIGNORE


# -- baselines and drift -------------------------------------------------------------


def verified_component(root: Path, cid: str = "lexer", *, passed: bool = True) -> None:
    contract = root / ".pact" / "contracts" / cid
    (contract / "tests").mkdir(parents=True)
    (contract / "interface.json").write_text(json.dumps({"component_id": cid, "version": 1}))
    (contract / "tests" / "contract_test.py").write_text("def test_x():\n    assert True\n")
    impl = root / ".pact" / "implementations" / cid
    (impl / "src").mkdir(parents=True)
    (impl / "src" / f"{cid}.py").write_text("X = 1\n")
    results = TestResults(total=4, passed=4 if passed else 3, failed=0 if passed else 1)
    (impl / "test_results.json").write_text(results.model_dump_json())


def test_no_drift_clean(tmp_path: Path) -> None:
    verified_component(tmp_path)
    baseline = capture_baseline("lexer", tmp_path)
    assert detect_drift(baseline, tmp_path) == []
    # Running the tests by hand leaves interpreter caches: that is not an edit.
    cache = tmp_path / ".pact/implementations/lexer/src/__pycache__"
    cache.mkdir()
    (cache / "lexer.cpython-311.pyc").write_bytes(b"\0")
    assert detect_drift(baseline, tmp_path) == []


def test_impl_drift_detected(tmp_path: Path) -> None:
    verified_component(tmp_path)
    baseline = capture_baseline("lexer", tmp_path)
    (tmp_path / ".pact/implementations/lexer/src/lexer.py").write_text("X = 2\n")
    found = check_drift(baseline, tmp_path)
    assert [(f.artifact, f.severity) for f in found] == [("implementation", "warning")]
    assert "contract version unchanged" in detect_drift(baseline, tmp_path)[0]
    # With the contract's version bumped the change is explained, still to re-verify.
    interface = tmp_path / ".pact/contracts/lexer/interface.json"
    interface.write_text(json.dumps({"component_id": "lexer", "version": 2}))
    (tmp_path / ".pact/contracts/lexer/tests/contract_test.py").write_text("def test_y(): ...\n")
    messages = detect_drift(baseline, tmp_path)
    assert any("contract version 1 -> 2" in m for m in messages)
    assert not any(m.startswith("error") for m in messages)


def test_contract_drift_without_test_update(tmp_path: Path) -> None:
    verified_component(tmp_path)
    baseline = capture_baseline("lexer", tmp_path)
    interface = tmp_path / ".pact/contracts/lexer/interface.json"
    interface.write_text(json.dumps({"component_id": "lexer", "version": 1, "x": 1}))
    found = check_drift(baseline, tmp_path)
    assert [(f.artifact, f.severity) for f in found] == [("contract", "error")]
    assert detect_drift(baseline, tmp_path)[0].startswith("error: lexer: contract changed")


def test_untouched_files_are_not_read_again_and_touched_ones_are_hashed(tmp_path: Path) -> None:
    import os

    verified_component(tmp_path)
    baseline = capture_baseline("lexer", tmp_path)
    assert set(baseline.stats) == {
        "interface.json",
        "tests/",
        "tests/contract_test.py",
        "src/",
        "src/lexer.py",
    }
    code = tmp_path / ".pact/implementations/lexer/src/lexer.py"
    os.utime(code, ns=(1, 1))  # touched, same bytes: hashed, no drift
    assert check_drift(baseline, tmp_path) == []
    code.write_text("X = 3\n")  # same size, new bytes
    assert [f.artifact for f in check_drift(baseline, tmp_path)] == ["implementation"]
    # A new file beside the verified ones changes the signature too.
    code.write_text("X = 1\n")
    (code.parent / "extra.py").write_text("")
    assert [f.artifact for f in check_drift(baseline, tmp_path)] == ["implementation"]


def test_an_untouched_component_is_checked_by_name_without_listing_a_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The signature names the directories: a clean component costs one stat per file
    and directory. A file added beside the verified ones changes its directory's
    mtime, so it is noticed without a listing."""
    import os

    verified_component(tmp_path)
    baseline = capture_baseline("lexer", tmp_path)
    src = tmp_path / ".pact/implementations/lexer/src"
    with monkeypatch.context() as m:
        m.setattr(os, "scandir", _no_listing)
        assert untouched(tmp_path, baseline)
    extra = src / "extra.py"
    extra.write_text("X = 1\n")
    os.utime(src, ns=(1, 1))  # the mtime changed: whatever it was
    assert not untouched(tmp_path, baseline)
    extra.unlink()
    # Interpreter caches change src/'s mtime too; the files are then listed, caches
    # left out, and the component is still untouched (nothing hashed).
    (src / "__pycache__").mkdir()
    with monkeypatch.context() as m:
        m.setattr(baseline_module, "hash_tree", _no_hashing)
        m.setattr(drift_module, "hash_tree", _no_hashing)
        assert untouched(tmp_path, baseline)
        assert check_drift(baseline, tmp_path) == []


def test_a_signature_without_directories_is_checked_by_listing(tmp_path: Path) -> None:
    """Baselines captured before directories were part of the signature still work."""
    verified_component(tmp_path)
    captured = capture_baseline("lexer", tmp_path)
    old = captured.model_copy(
        update={"stats": {k: v for k, v in captured.stats.items() if not k.endswith("/")}}
    )
    assert untouched(tmp_path, old)
    (tmp_path / ".pact/implementations/lexer/src/extra.py").write_text("")
    assert not untouched(tmp_path, old)
    assert [f.artifact for f in check_drift(old, tmp_path)] == ["implementation"]


def test_the_signature_covers_exactly_the_files_that_are_hashed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The stat signature and the hash walk the same files: a cache, a compiled module
    and a linked directory are in neither; a file named only ``.pyc``, a nested module
    and a linked file are in both."""
    import os

    verified_component(tmp_path)
    src = tmp_path / ".pact/implementations/lexer/src"
    (src / "pkg").mkdir()
    (src / "pkg" / "inner.py").write_text("Y = 2\n")
    (src / ".pyc").write_text("not compiled\n")
    (src / "lexer.cpython-311.pyc").write_bytes(b"\0")
    (src / "__pycache__").mkdir()
    (src / "__pycache__" / "lexer.py").write_text("")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "shared.py").write_text("Z = 3\n")
    os.symlink(outside, src / "linked_dir")
    os.symlink(outside / "shared.py", src / "linked.py")

    hashed: list[str] = []
    real_hash_files = baseline_module.hash_files

    def recording(files: dict[str, bytes]) -> str:
        hashed.extend(files)
        return real_hash_files(files)

    with monkeypatch.context() as m:
        m.setattr(baseline_module, "hash_files", recording)
        baseline_module.hash_tree(src)
    signed = {
        name.removeprefix("src/")
        for name in baseline_module.file_stats(tmp_path, "lexer")
        if name.startswith("src/") and not name.endswith("/")
    }
    assert sorted(hashed) == sorted(signed) == [".pyc", "lexer.py", "linked.py", "pkg/inner.py"]


def test_an_edit_to_a_file_named_only_pyc_is_drift(tmp_path: Path) -> None:
    """``.pyc`` alone is not a compiled module: it is hashed, so it is in the signature,
    and an edit in place (its directory's mtime unchanged) is noticed."""
    verified_component(tmp_path)
    odd = tmp_path / ".pact/implementations/lexer/src/.pyc"
    odd.write_text("A = 1\n")
    baseline = capture_baseline("lexer", tmp_path)
    assert check_drift(baseline, tmp_path) == []
    odd.write_text("A = 2\n")
    assert [f.artifact for f in check_drift(baseline, tmp_path)] == ["implementation"]


def _no_listing(*args: object) -> object:
    raise AssertionError("a directory was listed")


def _no_hashing(*args: object) -> object:
    raise AssertionError("a file was hashed")


def test_a_deleted_verified_file_is_a_drift_error(tmp_path: Path) -> None:
    verified_component(tmp_path)
    baseline = capture_baseline("lexer", tmp_path)
    (tmp_path / ".pact/implementations/lexer/src/lexer.py").unlink()
    assert [(f.artifact, f.severity) for f in check_drift(baseline, tmp_path)] == [
        ("implementation", "error")
    ]


def test_baseline_capture_after_passing_tests(tmp_path: Path) -> None:
    verified_component(tmp_path, "good")
    verified_component(tmp_path, "bad", passed=False)
    assert capture_baseline("good", tmp_path).test_results is not None
    with pytest.raises(BaselineError, match="did not all pass"):
        capture_baseline("bad", tmp_path)
    with pytest.raises(BaselineError, match="no verified test results"):
        capture_baseline("never_run", tmp_path)
    with pytest.raises(BaselineError):
        baseline_from_verified(
            "bad", contract=b"{}", tests={}, src={}, results=None, captured_at="x"
        )


def test_a_baseline_from_the_store_equals_one_from_the_disk(tmp_path: Path) -> None:
    verified_component(tmp_path)
    from_disk = capture_baseline("lexer", tmp_path)
    from_store = baseline_from_verified(
        "lexer",
        contract=(tmp_path / ".pact/contracts/lexer/interface.json").read_bytes(),
        tests={"contract_test.py": b"def test_x():\n    assert True\n"},
        src={"lexer.py": b"X = 1\n"},
        results=from_disk.test_results,
        captured_at=from_disk.captured_at,
    )
    assert from_store == from_disk.model_copy(update={"stats": {}})
    assert hash_tree(tmp_path / "nothing") == ""


def test_hash_tree_reads_every_file_below_but_caches_and_linked_directories(
    tmp_path: Path,
) -> None:
    root = tmp_path / "src"
    (root / "pkg" / "__pycache__").mkdir(parents=True)
    (root / "pkg" / "__pycache__" / "mod.cpython-311.pyc").write_bytes(b"compiled")
    (root / "pkg" / "mod.py").write_bytes(b"X = 1\n")
    (root / "pkg" / "stale.pyc").write_bytes(b"compiled")
    (root / ".pyc").write_bytes(b"a dot file, not compiled")
    (root / ".hidden").write_bytes(b"read too")
    (root / "top.py").write_bytes(b"Y = 2\n")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "far.py").write_bytes(b"far")
    (root / "linked_dir").symlink_to(elsewhere, target_is_directory=True)
    (root / "linked.py").symlink_to(elsewhere / "far.py")

    assert hash_tree(root) == hash_files(
        {
            "pkg/mod.py": b"X = 1\n",
            ".pyc": b"a dot file, not compiled",
            ".hidden": b"read too",
            "top.py": b"Y = 2\n",
            "linked.py": b"far",
        }
    )
    assert hash_tree(root / "pkg" / "__pycache__") == ""


# -- staleness ------------------------------------------------------------------------


def baseline(cid: str, days_ago: int) -> ArtifactBaseline:
    return ArtifactBaseline(
        component_id=cid,
        contract_hash="c",
        test_hash="t",
        impl_hash="i",
        captured_at=(NOW - timedelta(days=days_ago)).isoformat(),
    )


def test_fresh_within_window() -> None:
    check = check_staleness("a", baseline("a", 30), {"b": baseline("b", 40)}, 90, now=NOW)
    assert (check.status, check.days_since_verification, check.dependency_updates_since) == (
        "fresh",
        30,
        0,
    )


def test_aging_dep_changed() -> None:
    check = check_staleness("a", baseline("a", 30), {"b": baseline("b", 2)}, 90, now=NOW)
    assert (check.status, check.dependency_updates_since) == ("aging", 1)
    assert "b" in check.reason


def test_stale_past_window() -> None:
    check = check_staleness("a", baseline("a", 100), {}, 90, now=NOW)
    assert check.status == "stale" and check.days_since_verification == 100
    assert "90-day window" in check.reason
    assert check_staleness("a", baseline("a", 100), {}, 120, now=NOW).status == "fresh"
    with pytest.raises(ValueError, match="at least 1"):
        check_staleness("a", baseline("a", 1), {}, 0, now=NOW)


# -- rebuild re-creates ---------------------------------------------------------------


def test_restore_re_creates_lost_sidecars_from_the_log_not_from_edited_files(
    tmp_path: Path,
) -> None:
    builder = RunBuilder(tmp_path, star_tree(1))
    builder.complete("c1")
    store = builder.store
    project = builder.close()
    state = rebuild_state(tmp_path)
    assert restore_provenance(project, state, store) == 3  # three sidecars
    sidecar = read_artifact_metadata(project.destination("c1", Phase.TEST))
    assert sidecar is not None and sidecar.cost_usd == 0.01 and sidecar.run_id == state.run_id
    assert restore_provenance(project, state, store) == 0  # nothing lost: no write
    assert (project.pact / ".gitignore").read_text() == GITIGNORE


# -- retrospectives -------------------------------------------------------------------


def failed_run(root: Path) -> Path:
    """c1 done; c2's implementation rejected twice with a failing test, then the run
    failed; c3's tests failed transiently once, then passed."""
    builder = RunBuilder(root, star_tree(3))
    builder.complete("c1")
    suite = "\n".join(f"def test_case_{i}():\n    assert True\n" for i in range(5))
    builder.project.promote("c1", Phase.TEST, {"tests/contract_test.py": suite.encode()})
    for phase in (Phase.CONTRACT, Phase.TEST):
        builder.succeed("c2", phase, cost_usd=0.02)
    results = TestResults(
        total=3,
        passed=2,
        failed=1,
        failure_details=[
            {
                "test_id": "contract_test.py::test_division_by_zero",
                "error_message": "ZeroDivisionError",
            }
        ],
    )
    for attempt in (1, 2):
        builder.log(
            ItemDispatched(component_id="c2", phase=Phase.IMPLEMENT, attempt=attempt, role="r")
        )
        builder.log(
            ItemFailed(
                component_id="c2",
                phase=Phase.IMPLEMENT,
                attempt=attempt,
                error_class=ErrorClass.PERMANENT,
                error_type="tests_failed",
                error=results.summary(),
                test_results=results,
                usage=Usage(cost_usd=0.05),
                decision="retry" if attempt == 1 else "give_up",
            )
        )
    builder.succeed("c3", Phase.CONTRACT)
    builder.log(ItemDispatched(component_id="c3", phase=Phase.TEST, attempt=1, role="r"))
    builder.log(
        ItemFailed(
            component_id="c3",
            phase=Phase.TEST,
            attempt=1,
            error_class=ErrorClass.TRANSIENT,
            error_type="RateLimitError",
            error="429",
            usage=Usage(cost_usd=0.001),
            decision="retry",
        )
    )
    builder.log(ItemDispatched(component_id="c3", phase=Phase.TEST, attempt=2, role="r"))
    builder.log(
        ItemSucceeded(
            component_id="c3", phase=Phase.TEST, attempt=2, output="x", usage=Usage(cost_usd=0.01)
        )
    )
    builder.fail_run("c2/implement: tests still failing after 2 attempts")
    builder.close()
    return root


def test_retrospective_captures_cost(tmp_path: Path) -> None:
    retro = generate_retrospective(failed_run(tmp_path))
    # c1: 3 x 0.01; c2: 2 x 0.02 + 2 x 0.05; c3: 0.01 + 0.001 + 0.01
    assert retro.total_cost == pytest.approx(0.03 + 0.14 + 0.021)
    assert retro.cost_distribution == pytest.approx(
        {"root": 0.0, "c1": 0.03, "c2": 0.14, "c3": 0.021}
    )
    assert retro.components_count == 4
    assert retro.total_duration_seconds >= 0


def test_retrospective_cost_includes_what_planning_cost(tmp_path: Path) -> None:
    builder = RunBuilder(tmp_path, star_tree(1))
    builder.log(
        InterviewRecorded(
            output="sha256:" + "0" * 64,
            usage={"interviewer": Usage(cost_usd=0.25), "decomposer": Usage(cost_usd=0.5)},
        )
    )
    builder.complete("c1")
    builder.close()
    retro = generate_retrospective(tmp_path)
    assert retro.total_cost == pytest.approx(0.75 + 0.03)
    assert retro.cost_distribution["c1"] == pytest.approx(0.03)
    assert rebuild_state(tmp_path).usage.cost_usd == pytest.approx(retro.total_cost)


def test_retrospective_identifies_largest_suite(tmp_path: Path) -> None:
    retro = generate_retrospective(failed_run(tmp_path))
    assert retro.largest_test_suite == ("c1", 5)  # c2's suite has one test


def test_retrospective_after_failure(tmp_path: Path) -> None:
    project = failed_run(tmp_path)
    retro = write_retrospective(project)
    assert retro.status == "failed"
    assert (project / ".pact" / "retrospectives" / f"{retro.run_id}.json").is_file()
    assert (
        "run failed: c2/implement: tests still failing after 2 attempts" in retro.failure_patterns
    )
    assert retro.lessons[0].startswith(
        "c2/implement: 2 rejected attempt(s) failed test_division_by_zero"
    )
    assert "it never passed" in retro.lessons[0]
    retried = "c3/test needed 1 retry(ies) for RateLimitError"
    assert any(lesson.startswith(retried) for lesson in retro.lessons)


def test_lessons_are_specific(tmp_path: Path) -> None:
    retro = generate_retrospective(failed_run(tmp_path))
    assert retro.lessons
    for lesson in retro.lessons:
        assert not is_vague(lesson), lesson
        assert any(cid in lesson for cid in ("c1", "c2", "c3")), lesson
    names = {"c2", "implement"}
    assert specific_lessons(
        [
            "Follow best practice when writing code.",  # vague
            "Handle errors as needed in c2.",  # vague, even though it names c2
            "Be more careful next time.",  # names nothing of the run
            "c2/implement failed test_x twice.",
            "c2/implement failed test_x twice.",  # duplicate
        ],
        names,
    ) == ["c2/implement failed test_x twice."]


def test_a_log_without_a_run_has_no_retrospective(tmp_path: Path) -> None:
    (tmp_path / ".pact").mkdir()
    (tmp_path / ".pact" / "audit.jsonl").write_text("")
    with pytest.raises(ValueError, match="holds no run"):
        generate_retrospective(tmp_path)


def test_lessons_are_keyed_by_the_effective_settings_and_agent_options() -> None:
    base = Settings()
    same = lessons_key(base, {"model": "m1"})
    assert lessons_key(Settings(), {"model": "m1"}) == same  # another copy of the file
    assert lessons_key(base, {"model": "m2"}) != same  # submitted with other --settings
    assert lessons_key(Settings(max_attempts=1), {"model": "m1"}) != same


def test_prior_lessons_come_newest_first_without_duplicates(tmp_path: Path) -> None:
    project = failed_run(tmp_path / "p")
    retro = write_retrospective(project)
    older = retro.model_copy(
        update={"run_id": "old", "generated_at": "2020-01-01T00:00:00+00:00", "lessons": ["x"]}
    )
    publish(older, "k")
    publish(retro, "k")  # the same lessons again, from the store
    found = prior_lessons(project, "k")
    assert found == [*retro.lessons, "x"]
    assert prior_lessons(tmp_path / "nothing", "other") == []


# -- lessons in the code author's context ---------------------------------------------


def test_lessons_are_tier_two_of_the_code_author_context_naming_the_component_first() -> None:
    contract = ComponentContract(component_id="lexer", name="Lexer", description="Tokens.")
    suite = ContractTestSuite(component_id="lexer")
    lessons = [
        "parser/implement: 2 rejected attempt(s) failed test_nesting (depth).",
        "lexer/implement: 1 rejected attempt(s) failed test_unicode (UnicodeError).",
    ]
    text = build_code_agent_context(contract, suite, lessons=lessons)
    section = text.split("## Lessons from earlier runs\n", 1)[1].splitlines()
    assert section == [f"- {lessons[1]}", f"- {lessons[0]}"]
    assert "## Lessons" not in build_code_agent_context(contract, suite)
    # At a tiny budget tier 1 stays whole and the lessons go.
    small = build_code_agent_context(contract, suite, max_tokens=10, lessons=lessons)
    assert "## Contract (interface.json)" in small and "Lessons" not in small


def test_the_code_author_prompt_shows_the_lessons_input() -> None:
    contract = ComponentContract(component_id="lexer", name="Lexer", description="Tokens.")
    request = AgentRequest(
        run_id="r",
        component_id="lexer",
        phase=Phase.IMPLEMENT,
        role=Role.CODE_AUTHOR,
        attempt=1,
        inputs={
            "contract": {"interface.json": contract.model_dump_json().encode()},
            "lessons": {"lessons.json": json.dumps(["lexer/implement: failed test_a."]).encode()},
        },
    )
    assert "- lexer/implement: failed test_a." in render_prompt(request).user
    broken = {**request.inputs, "lessons": {"lessons.json": b"not json"}}
    prompt = render_prompt(replace(request, inputs=broken)).user
    assert "Lessons from earlier runs" not in prompt


def test_lessons_do_not_change_the_action_key() -> None:
    from tests.unit.test_action_cache import key_of

    spec = {"spec": "sha256:" + "a" * 64}
    plain = key_of(inputs=spec)
    advised = key_of(inputs={**spec, "lessons": "sha256:" + "c" * 64})
    assert advised == plain  # a verified result is served whatever the lessons were
    assert key_of(inputs={**spec, "contract": "sha256:" + "c" * 64}) != plain
