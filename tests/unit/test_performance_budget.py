"""Performance budgets (seed 000, 5.3), verified by the harness's own tests in a real sandbox."""

from __future__ import annotations

import sys

import pytest

from pact_workers.errors import VerificationError
from pact_workers.models import EnvironmentSpec
from pact_workers.models.contract import ComponentContract
from pact_workers.models.testing import TestResults
from pact_workers.sandbox import LocalSandbox
from pact_workers.verify import BUDGET_TESTS, check_implementation_files, run_contract_tests
from tests.contracts import contract, function

ENV = EnvironmentSpec(python_path=sys.executable)

SOURCE = b"""
import asyncio
import time


def add(a, b):
    time.sleep(DELAY)
    return a + b


def unused(a):
    return a


def hog(n):
    block = [0] * n
    return len(block)


class Counter:
    def __init__(self, start):
        self.value = start

    def bump(self, by):
        time.sleep(DELAY)
        self.value += by
        return self.value


async def fetch(x):
    await asyncio.sleep(0)
    time.sleep(DELAY)
    return x
"""

TESTS = b"""
import asyncio

from adder import Counter, add, fetch, hog


def test_adds():
    assert add(1, 2) == 3
    assert add(-1, 1) == 0


def test_counts():
    assert Counter(1).bump(2) == 3


def test_hog():
    assert hog(10) == 10


def test_fetch():
    assert asyncio.run(fetch(4)) == 4
"""


def budgeted(**budgets: dict[str, int]) -> ComponentContract:
    return contract(
        "adder",
        functions=[function(name, performance_budget=b) for name, b in budgets.items()],
    )


def verify(delay_s: float, the_contract: ComponentContract, **extra_tests: bytes) -> TestResults:
    source = SOURCE.replace(b"DELAY", repr(delay_s).encode())
    results, _ = run_contract_tests(
        LocalSandbox(),
        implementation={"src/adder.py": source},
        tests={"tests/contract_test.py": TESTS, **extra_tests},
        environment=ENV,
        timeout_s=120,
        contract=the_contract,
    )
    return results


def messages(results: TestResults) -> str:
    return "\n".join(f"{f.test_id}: {f.error_message}" for f in results.failure_details)


def test_a_function_over_its_p95_budget_fails_with_the_budget_and_the_measured_p95() -> None:
    results = verify(0.03, budgeted(add={"p95_latency_ms": 10}))
    assert results.total == 5 and results.passed == 4 and results.failed == 1, messages(results)
    (failure,) = results.failure_details
    assert "test_add_p95_latency_within_10_ms" in failure.test_id
    assert "p95 latency of adder.add is 3" in failure.error_message
    assert "over its budget of 10 ms (p95_latency_ms)" in failure.error_message
    assert "after 10 warm-up calls" in failure.error_message
    assert "the 2 argument sets the contract tests called it with" in failure.error_message


def test_a_function_within_its_p95_budget_passes() -> None:
    results = verify(0.0, budgeted(add={"p95_latency_ms": 50}))
    assert results.all_passed and results.total == 5, messages(results)


def test_methods_constructors_and_coroutines_are_timed_too() -> None:
    slow = verify(
        0.03,
        budgeted(
            **{"Counter.bump": {"p95_latency_ms": 5}},
            Counter={"p95_latency_ms": 50},
            fetch={"p95_latency_ms": 5},
        ),
    )
    failed = {f.test_id.rsplit("::", 1)[-1] for f in slow.failure_details}
    assert failed == {
        "test_Counter_bump_p95_latency_within_5_ms",
        "test_fetch_p95_latency_within_5_ms",
    }, messages(slow)
    assert slow.passed == 5  # the four contract tests and the constructor's budget


def test_memory_budget_is_the_peak_python_allocation_of_one_call() -> None:
    over = verify(0.0, budgeted(hog={"max_memory_mb": 1}), **{"tests/extra_test.py": EXTRA})
    (failure,) = over.failure_details
    assert "peak memory of adder.hog is" in failure.error_message
    assert "over its budget of 1 MB (max_memory_mb" in failure.error_message
    within = verify(0.0, budgeted(hog={"max_memory_mb": 100}), **{"tests/extra_test.py": EXTRA})
    assert within.all_passed, messages(within)


EXTRA = b"""
from adder import hog


def test_big_hog():
    assert hog(2_000_000) == 2_000_000
"""


def test_a_budgeted_function_the_tests_never_call_fails_and_says_why() -> None:
    results = verify(0.0, budgeted(unused={"p95_latency_ms": 50}))
    (failure,) = results.failure_details
    assert "never called it successfully" in failure.error_message


def test_the_budget_tests_are_the_harness_s_even_if_a_test_file_claims_their_name() -> None:
    forged = {BUDGET_TESTS: b"def test_add_p95_latency_within_10_ms():\n    assert True\n"}
    results = verify(0.03, budgeted(add={"p95_latency_ms": 10}), **forged)
    assert results.failed == 1 and "over its budget" in messages(results)
    with pytest.raises(VerificationError, match="shadow the harness module"):
        check_implementation_files({"src/pact_budget_plugin.py": b""}, "adder")


def test_without_a_budget_nothing_is_added() -> None:
    results = verify(0.0, budgeted(add={"complexity": "O(1)"}))
    assert results.all_passed and results.total == 4
