"""Seed 001: regression attribution, the gate delta, the decision table row by row,
and baseline abuse (``scheduler.regression``)."""

from __future__ import annotations

import pytest

from pact_workers.models.testing import HARNESS_TEST_ID, TestFailure, TestResults
from scheduler.regression import (
    Finding,
    Gate,
    Intent,
    PatchStatus,
    check_patch_contract,
    compare_runs,
    detect_baseline_abuse,
    gate_worsened,
    partition,
    paths_in,
)

INTENT = Intent(allowed_files=("src/lexer.py",), allowed_related=("src/tokens/*",))
IN_SCOPE = 'Traceback:\n  File "/workspace/src/lexer.py", line 12, in lex\nValueError: bad'
OUT_OF_SCOPE = 'Traceback:\n  File "/workspace/src/parser.py", line 3, in parse\nKeyError'


def results(*failures: tuple[str, str], passed: int = 3) -> TestResults:
    details = [TestFailure(test_id=t, error_message=m) for t, m in failures]
    return TestResults(
        total=passed + len(details), passed=passed, failed=len(details), failure_details=details
    )


GREEN = results()


def test_a_test_failing_after_but_not_before_is_a_regression_with_its_traceback_paths() -> None:
    before = results(("t_old", "already failing"))
    after = results(("t_old", "already failing"), ("t_new", IN_SCOPE))
    assert compare_runs(before, after) == [
        Finding(test_id="t_new", message=IN_SCOPE, paths=("src/lexer.py",))
    ]


def test_paths_are_taken_from_tracebacks_and_pytest_short_form_relative_to_the_workspace() -> None:
    text = (
        'File "/tmp/x/src/a.py", line 1\n'
        'File "/usr/lib/python3.11/json/__init__.py", line 3\n'
        "tests/contract_test.py:14: AssertionError\n"
    )
    assert paths_in(text) == ("src/a.py", "tests/contract_test.py")


def test_a_killed_after_run_is_one_path_less_finding() -> None:
    after = TestResults(
        total=0,
        errors=1,
        failure_details=[TestFailure(test_id=HARNESS_TEST_ID, error_message="TimeoutError")],
    )
    assert compare_runs(GREEN, after) == [Finding(test_id=HARNESS_TEST_ID, message="TimeoutError")]


def test_path_less_findings_are_intent_scope_and_no_intent_makes_everything_intent() -> None:
    findings = [
        Finding(test_id="a", paths=("src/lexer.py",)),
        Finding(test_id="b", paths=("src/parser.py",)),
        Finding(test_id="c"),
        Finding(test_id="d", paths=("src/tokens/kinds.py", "src/parser.py")),
    ]
    inside, outside = partition(findings, INTENT)
    assert [f.test_id for f in inside] == ["a", "c", "d"]
    assert [f.test_id for f in outside] == ["b"]
    assert partition(findings, None) == (findings, [])


def test_gate_worsened_only_when_it_passed_before_and_fails_after() -> None:
    assert gate_worsened(Gate(would_fail=False), Gate(would_fail=True))
    assert not gate_worsened(Gate(would_fail=True), Gate(would_fail=True))
    assert not gate_worsened(Gate(would_fail=False), Gate(would_fail=False))
    assert not gate_worsened(Gate(would_fail=True), Gate(would_fail=False))


# -- the decision table, one test per row -----------------------------------------


@pytest.mark.parametrize(
    ("after", "status"),
    [
        (results(("t", OUT_OF_SCOPE)), PatchStatus.VIOLATED),
        (GREEN, PatchStatus.ACCEPTED),
    ],
)
def test_row_without_intent_every_regression_counts_as_before(
    after: TestResults, status: PatchStatus
) -> None:
    verdict = check_patch_contract("verify", intent=None, before=GREEN, after=after)
    assert verdict.status is status
    assert not verdict.external_regressions


def test_row_intent_regressions_make_it_violated_whatever_else() -> None:
    after = results(("t1", IN_SCOPE), ("t2", OUT_OF_SCOPE))
    verdict = check_patch_contract("verify", intent=INTENT, before=GREEN, after=after)
    assert verdict.status is PatchStatus.VIOLATED
    assert [f.test_id for f in verdict.intent_regressions] == ["t1"]
    assert [f.test_id for f in verdict.external_regressions] == ["t2"]


def test_row_a_gate_the_intent_worsened_is_violated() -> None:
    verdict = check_patch_contract(
        "verify",
        intent=INTENT,
        before=GREEN,
        after=GREEN,
        worsened_metrics=["src/lexer.py"],
        after_gate=Gate(would_fail=True),
    )
    assert verdict.status is PatchStatus.VIOLATED
    assert verdict.gate_worsened and verdict.intent_worsened == ("src/lexer.py",)


def test_row_a_gate_worsened_from_outside_is_accepted_with_external_changes() -> None:
    verdict = check_patch_contract(
        "verify", intent=INTENT, before=GREEN, after=results(("t", OUT_OF_SCOPE))
    )
    assert verdict.gate_worsened
    assert verdict.status is PatchStatus.ACCEPTED_WITH_EXTERNAL_CHANGES
    assert [f.test_id for f in verdict.external_regressions] == ["t"]


def test_row_external_regressions_without_a_worse_gate_are_accepted_with_external_changes() -> None:
    before = results(("already", "failing"))  # the gate failed before: not worsened
    after = results(("already", "failing"), ("t", OUT_OF_SCOPE))
    verdict = check_patch_contract("verify", intent=INTENT, before=before, after=after)
    assert not verdict.gate_worsened
    assert verdict.before_gate == Gate(would_fail=True)
    assert verdict.status is PatchStatus.ACCEPTED_WITH_EXTERNAL_CHANGES


def test_row_clean_is_accepted() -> None:
    verdict = check_patch_contract("verify", intent=INTENT, before=GREEN, after=GREEN)
    assert verdict.status is PatchStatus.ACCEPTED and verdict.accepted


def test_row_a_scope_violation_is_violated_even_when_everything_passes() -> None:
    verdict = check_patch_contract(
        "verify",
        intent=INTENT,
        before=GREEN,
        after=GREEN,
        changed_files=["src/lexer.py", "src/parser.py"],
    )
    assert verdict.status is PatchStatus.VIOLATED
    assert verdict.unexpected_files == ("src/parser.py",)


def test_scope_check_uses_exact_membership_while_attribution_uses_patterns() -> None:
    # src/tokens/* matches by fnmatch in verify, but is not a literal member in check.
    verdict = check_patch_contract("check", intent=INTENT, changed_files=["src/tokens/kinds.py"])
    assert verdict.status is PatchStatus.VIOLATED
    ok = check_patch_contract("check", intent=INTENT, changed_files=["src/lexer.py"])
    assert ok.status is PatchStatus.ACCEPTED


def test_a_missing_before_or_after_run_is_unverified() -> None:
    assert check_patch_contract("verify", intent=INTENT, after=GREEN).status is (
        PatchStatus.UNVERIFIED
    )
    assert check_patch_contract("verify", intent=INTENT, before=GREEN).status is (
        PatchStatus.UNVERIFIED
    )


def test_a_report_digest_changed_since_the_declaration_is_expired() -> None:
    verdict = check_patch_contract(
        "verify",
        intent=INTENT,
        before=GREEN,
        after=GREEN,
        declared_digest="sha256:aa",
        current_digest="sha256:bb",
    )
    assert verdict.status is PatchStatus.EXPIRED


# -- baseline abuse ---------------------------------------------------------------


def test_detect_baseline_abuse_flags_a_baseline_changed_while_any_regression_exists() -> None:
    external = [Finding(test_id="t", paths=("src/parser.py",))]
    abuse = detect_baseline_abuse("parser/test_results.json", "sha256:a", "sha256:b", external)
    assert abuse is not None and abuse.regressions == ("t",)


def test_detect_baseline_abuse_is_quiet_without_regressions_or_without_a_change() -> None:
    findings = [Finding(test_id="t")]
    assert detect_baseline_abuse("b", "sha256:a", "sha256:b", []) is None
    assert detect_baseline_abuse("b", "sha256:a", "sha256:a", findings) is None
