"""Systemic failure detection across components (seed 000, 1.4)."""

from __future__ import annotations

import dataclasses

import pytest

from pact_workers.errors import ProviderUnreachable
from pact_workers.models.testing import TestFailure, TestResults
from scheduler.systemic import SystemicPattern, detect_systemic_failure, failure_signature


def zero_zero() -> TestResults:
    """pytest ran but collected nothing (exit 5, an empty JUnit report)."""
    return TestResults(total=0, passed=0, timestamp="2026-02-14T10:00:00+00:00")


def no_pytest(component_id: str) -> TestResults:
    """The interpreter has no pytest: the harness's "no report" result."""
    return TestResults(
        total=0,
        errors=1,
        failure_details=[
            TestFailure(
                test_id="<harness>",
                error_message="pytest wrote no report (exit code 1)",
                stderr=f"/usr/bin/python3: No module named pytest\n[{component_id}]",
            )
        ],
    )


def collection_error(component_id: str, module: str) -> TestResults:
    """What pytest's JUnit report says when a test module cannot be imported."""
    traceback = (
        f"ImportError while importing test module '/tmp/ws-{component_id}/tests/"
        f"test_{component_id}.py'.\n"
        "Hint: make sure your test modules/packages have valid Python names.\n"
        "Traceback:\n"
        "/usr/lib/python3.11/importlib/__init__.py:126: in import_module\n"
        "    return _bootstrap._gcd_import(name[level:], package, level)\n"
        f"src/{component_id}.py:3: in <module>\n"
        f"    import {module}\n"
        f"E   ModuleNotFoundError: No module named '{module}'"
    )
    return TestResults(
        total=1,
        errors=1,
        failure_details=[
            TestFailure(
                test_id=f"tests.test_{component_id}::",
                error_message="collection failure",
                stdout=traceback,
            )
        ],
    )


def import_failure(module: str) -> TestResults:
    """A test that fails because an import inside the code under test fails."""
    return TestResults(
        total=4,
        passed=0,
        failed=4,
        failure_details=[
            TestFailure(
                test_id=f"tests.test_x::test_{i}",
                error_message=f"ModuleNotFoundError: No module named '{module}'",
            )
            for i in range(4)
        ],
    )


def cannot_import_name(component_id: str) -> TestResults:
    return TestResults(
        total=1,
        errors=1,
        failure_details=[
            TestFailure(
                test_id=f"tests.test_{component_id}::",
                error_message="collection failure",
                stdout=(
                    "E   ImportError: cannot import name 'Ledger' from 'schemas' "
                    f"(/tmp/ws-{component_id}/src/schemas/__init__.py)"
                ),
            )
        ],
    )


def timed_out(timeout_s: int = 300) -> TestResults:
    """The harness's result when it killed the test run (pact_workers.verify)."""
    return TestResults(
        total=0,
        errors=1,
        failure_details=[
            TestFailure(
                test_id="<harness>",
                error_message=f"TimeoutError: test run killed after {timeout_s}s",
            )
        ],
    )


def assertion_failure(message: str = "AssertionError: assert 3 == 4") -> TestResults:
    return TestResults(
        total=3,
        passed=2,
        failed=1,
        failure_details=[TestFailure(test_id="tests.test_x::test_add", error_message=message)],
    )


def passed() -> TestResults:
    return TestResults(total=3, passed=3)


# --- failure_signature -------------------------------------------------------------


def test_signature_of_zero_zero_is_zero_tests() -> None:
    assert failure_signature(zero_zero()) == ("zero_tests", "")


def test_signature_of_a_missing_pytest_is_zero_tests_not_an_import_error() -> None:
    assert failure_signature(no_pytest("a")) == ("zero_tests", "")


def test_signature_of_a_collection_error_names_the_module() -> None:
    expected = ("import_error", "No module named 'numpy'")
    assert failure_signature(collection_error("a", "numpy")) == expected
    assert failure_signature(import_failure("numpy")) == expected


def test_signature_of_cannot_import_name_drops_the_workspace_path() -> None:
    expected = ("import_error", "cannot import name 'Ledger' from 'schemas'")
    assert failure_signature(cannot_import_name("a")) == expected
    assert failure_signature(cannot_import_name("b")) == expected


def test_signature_of_a_timeout_masks_the_duration() -> None:
    assert failure_signature(timed_out(300)) == failure_signature(timed_out(600))
    assert failure_signature(timed_out()) == ("timeout", "TimeoutError: test run killed after Ns")


@pytest.mark.parametrize(
    "results",
    [
        passed(),
        assertion_failure(),
        assertion_failure("AssertionError: assert 'ok' == 'timed out'"),
        TestResults(total=2, passed=1, failed=1),
    ],
    ids=["pass", "assertion", "assertion-about-timeouts", "failure-without-details"],
)
def test_a_pass_or_an_ordinary_failure_has_no_signature(results: TestResults) -> None:
    assert failure_signature(results) is None


# --- detect_systemic_failure -------------------------------------------------------


def test_detect_all_zero_zero() -> None:
    results = {f"c{i}": zero_zero() for i in range(5)}
    pattern = detect_systemic_failure(results)
    assert pattern is not None
    assert pattern.pattern_type == "zero_tests"
    assert pattern.affected_components == ["c0", "c1", "c2", "c3", "c4"]


def test_detect_same_import_error() -> None:
    results = {
        "ledger": collection_error("ledger", "numpy"),
        "report": collection_error("report", "numpy"),
        "stats": import_failure("numpy"),
    }
    pattern = detect_systemic_failure(results)
    assert pattern is not None
    assert pattern.pattern_type == "import_error"
    assert pattern.affected_components == ["ledger", "report", "stats"]
    assert "No module named 'numpy'" in pattern.sample_error


def test_heterogeneous_failures_no_pattern() -> None:
    results = {
        "a": collection_error("a", "numpy"),
        "b": timed_out(),
        "c": assertion_failure(),
    }
    assert detect_systemic_failure(results) is None


def test_different_missing_modules_are_not_one_pattern() -> None:
    results = {
        "a": collection_error("a", "numpy"),
        "b": collection_error("b", "pandas"),
        "c": collection_error("c", "yaml"),
    }
    assert detect_systemic_failure(results) is None


def test_below_threshold_no_pattern() -> None:
    two = {"a": import_failure("numpy"), "b": import_failure("numpy")}
    assert detect_systemic_failure(two, threshold=3) is None
    two_of_four = {**two, "c": passed(), "d": assertion_failure()}
    assert detect_systemic_failure(two_of_four, threshold=3) is None


@pytest.mark.parametrize(
    ("results", "concrete"),
    [
        (
            {f"c{i}": zero_zero() for i in range(3)},
            ["environment.python_path", "environment.extra_path_dirs", "pact doctor", "pytest"],
        ),
        (
            {c: collection_error(c, "numpy") for c in ("a", "b", "c")},
            ["'numpy'", "pip install numpy", "environment.extra_path_dirs", "PYTHONPATH"],
        ),
        (
            {c: timed_out() for c in ("a", "b", "c")},
            ["role_timeouts.", "impatience: patient", "verify_timeout_s", "network"],
        ),
    ],
    ids=["zero_tests", "import_error", "timeout"],
)
def test_recommendation_is_actionable(results: dict[str, TestResults], concrete: list[str]) -> None:
    pattern = detect_systemic_failure(results)
    assert pattern is not None
    for fix in concrete:
        assert fix in pattern.recommendation
    for component_id in results:
        assert component_id in pattern.recommendation


def test_recommendation_uses_the_pypi_name_when_it_differs() -> None:
    pattern = detect_systemic_failure({c: import_failure("yaml") for c in ("a", "b", "c")})
    assert pattern is not None
    assert "pip install PyYAML" in pattern.recommendation
    assert "'yaml'" in pattern.recommendation


def test_recommendation_for_a_missing_name_points_at_the_module() -> None:
    pattern = detect_systemic_failure({c: cannot_import_name(c) for c in ("a", "b", "c")})
    assert pattern is not None
    assert pattern.pattern_type == "import_error"
    assert "'schemas'" in pattern.recommendation and "'Ledger'" in pattern.recommendation


def test_the_pattern_covering_most_components_wins() -> None:
    results = {
        **{f"z{i}": zero_zero() for i in range(4)},
        **{f"i{i}": import_failure("numpy") for i in range(3)},
    }
    pattern = detect_systemic_failure(results)
    assert pattern is not None
    assert pattern.pattern_type == "zero_tests"
    assert len(pattern.affected_components) == 4


def test_a_tie_goes_to_timeout_then_import_error() -> None:
    zeros = {f"z{i}": zero_zero() for i in range(3)}
    imports = {f"i{i}": import_failure("numpy") for i in range(3)}
    timeouts = {f"t{i}": timed_out() for i in range(3)}
    tie = detect_systemic_failure({**zeros, **imports, **timeouts})
    assert tie is not None and tie.pattern_type == "timeout"
    tie = detect_systemic_failure({**zeros, **imports})
    assert tie is not None and tie.pattern_type == "import_error"


def unreachable(
    endpoint: str = "127.0.0.1:8443", reason: str = "ConnectTimeout: timed out"
) -> TestResults:
    """An agent that could not reach its provider, as ``scheduler.failures`` describes it."""
    message = str(
        ProviderUnreachable(endpoint, f"anthropic API: {reason}; gave up after 3 attempts")
    )
    return TestResults(
        total=0, errors=1, failure_details=[TestFailure(test_id="<agent>", error_message=message)]
    )


def test_an_unreachable_provider_is_its_own_pattern_even_when_the_connect_timed_out() -> None:
    """A connect timeout is the provider's address, not a slow test: the signature is the
    provider, whatever the transport said, so refusals and timeouts count together."""
    results = {
        "a": unreachable(),
        "b": unreachable(reason="ConnectError: [Errno 111] Connection refused"),
        "c": unreachable(),
    }
    assert failure_signature(results["a"]) == ("provider_unreachable", "127.0.0.1:8443")
    pattern = detect_systemic_failure(results)
    assert pattern is not None and pattern.pattern_type == "provider_unreachable"
    assert pattern.affected_components == ["a", "b", "c"]
    for fix in ("127.0.0.1:8443", "base_url", "`pact resume DIR`", "a, b, c"):
        assert fix in pattern.recommendation


def test_unreachable_providers_at_different_addresses_are_not_one_pattern() -> None:
    results = {c: unreachable(f"10.0.0.{i}:443") for i, c in enumerate(("a", "b", "c"))}
    assert detect_systemic_failure(results) is None


def test_a_tie_goes_to_an_unreachable_provider_first() -> None:
    timeouts = {f"t{i}": timed_out() for i in range(3)}
    down = {f"u{i}": unreachable() for i in range(3)}
    tie = detect_systemic_failure({**timeouts, **down})
    assert tie is not None and tie.pattern_type == "provider_unreachable"


def test_passing_components_do_not_hide_a_pattern() -> None:
    results = {"ok1": passed(), **{f"c{i}": zero_zero() for i in range(3)}, "ok2": passed()}
    pattern = detect_systemic_failure(results)
    assert pattern is not None
    assert pattern.affected_components == ["c0", "c1", "c2"]


def test_a_long_component_list_is_summarised() -> None:
    pattern = detect_systemic_failure({f"c{i:02}": zero_zero() for i in range(27)})
    assert pattern is not None
    assert len(pattern.affected_components) == 27
    assert "27 components" in pattern.recommendation
    assert "and 22 more" in pattern.recommendation


def test_all_passing_is_no_pattern() -> None:
    assert detect_systemic_failure({f"c{i}": passed() for i in range(5)}) is None


def test_empty_results_are_no_pattern() -> None:
    assert detect_systemic_failure({}) is None


def test_a_threshold_below_one_is_rejected() -> None:
    with pytest.raises(ValueError, match="threshold"):
        detect_systemic_failure({"a": zero_zero()}, threshold=0)


def test_a_pattern_is_a_frozen_value() -> None:
    pattern = SystemicPattern("zero_tests", ["a"], "no tests", "fix it")
    with pytest.raises(dataclasses.FrozenInstanceError):
        pattern.pattern_type = "timeout"  # type: ignore[misc]
