"""The harness: contracts, test suites and test runs are checked, never trusted."""

from __future__ import annotations

import json
import sys

import pytest

from pact_workers.agents.base import AgentOutput, AgentRequest
from pact_workers.artifacts import ArtifactStore, MemoryBlobStore
from pact_workers.errors import VerificationError
from pact_workers.models import EnvironmentSpec
from pact_workers.models.testing import TestFailure, TestResults
from pact_workers.models.work import Phase, TaskMessage
from pact_workers.runner import TESTS_FAILED, execute_task
from pact_workers.sandbox import LocalSandbox
from pact_workers.verify import (
    check_implementation_files,
    count_tests,
    parse_junit,
    run_contract_tests,
    verify_contract,
    verify_test_suite,
)
from scheduler.systemic import failure_signature

ENV = EnvironmentSpec(python_path=sys.executable)

CONTRACT = {
    "component_id": "adder",
    "name": "Adder",
    "description": "adds",
    "functions": [{"name": "add", "description": "a+b", "inputs": [], "output_type": "int"}],
}
TESTS = b"""
from adder import add

def test_adds():
    assert add(1, 2) == 3

class TestMore:
    def test_zero(self):
        assert add(0, 0) == 0
    def test_negative(self):
        assert add(-1, 1) == 0
"""


def test_contract_must_parse_and_name_its_component() -> None:
    files = {"interface.json": json.dumps(CONTRACT).encode()}
    assert verify_contract(files, "adder").functions[0].name == "add"
    with pytest.raises(VerificationError, match="names component"):
        verify_contract(files, "other")
    with pytest.raises(VerificationError, match="invalid contract"):
        verify_contract({"interface.json": b'{"component_id": "adder"}'}, "adder")
    with pytest.raises(VerificationError, match="no interface.json"):
        verify_contract({}, "adder")


def test_test_suite_needs_tests() -> None:
    assert count_tests(TESTS.decode()) == 3
    assert verify_test_suite({"tests/contract_test.py": TESTS}, "adder") == 3
    with pytest.raises(VerificationError, match="no tests"):
        verify_test_suite({"tests/contract_test.py": b"x = 1\n"}, "adder")
    with pytest.raises(VerificationError, match="invalid syntax|was never closed|expected"):
        verify_test_suite({"tests/contract_test.py": b"def test_(:\n"}, "adder")
    with pytest.raises(VerificationError, match="outside tests/"):
        verify_test_suite({"tests/contract_test.py": TESTS, "src/adder.py": b""}, "adder")


def test_implementation_may_not_shadow_the_harness() -> None:
    with pytest.raises(VerificationError, match="shadow"):
        check_implementation_files({"src/adder.py": b"", "src/pytest.py": b""}, "adder")
    with pytest.raises(VerificationError, match="outside src/"):
        check_implementation_files({"adder.py": b""}, "adder")


def run_tests(impl: bytes) -> object:
    results, _ = run_contract_tests(
        LocalSandbox(),
        implementation={"src/adder.py": impl},
        tests={"tests/contract_test.py": TESTS},
        environment=ENV,
        timeout_s=60,
    )
    return results


def test_passing_implementation_passes() -> None:
    results = run_tests(b"def add(a, b):\n    return a + b\n")
    assert (results.total, results.passed, results.all_passed) == (3, 3, True)


def test_failing_implementation_reports_which_tests_and_why() -> None:
    results = run_tests(b"def add(a, b):\n    return a - b\n")
    assert results.total == 3 and results.failed == 2 and not results.all_passed
    ids = {f.test_id for f in results.failure_details}
    assert any(i.endswith("test_adds") for i in ids)
    assert any("assert" in f.error_message for f in results.failure_details)


def test_import_error_is_an_error_not_a_pass() -> None:
    results = run_tests(b"import no_such_module_xyz\n")
    assert not results.all_passed
    assert any("No module named" in (f.error_message + f.stdout) for f in results.failure_details)


def test_report_forged_by_the_implementation_is_not_believed() -> None:
    forged = (
        b"import glob, os\n"
        b"def add(a, b):\n    return a - b\n"
        b"for p in glob.glob('.pact-report*'):\n    pass\n"
        b"open('.pact-report.xml', 'w').write('<testsuite><testcase name=\"x\"/></testsuite>')\n"
    )
    results = run_tests(forged)
    assert not results.all_passed


def test_junit_parsing_counts_outcomes() -> None:
    xml = b"""<testsuites><testsuite>
      <testcase classname="t" name="a"/>
      <testcase classname="t" name="b"><failure message="boom">trace</failure></testcase>
      <testcase classname="t" name="c"><error message="ImportError">x</error></testcase>
      <testcase classname="t" name="d"><skipped message="later"/></testcase>
    </testsuite></testsuites>"""
    r = parse_junit(xml)
    assert (r.total, r.passed, r.failed, r.errors, r.skipped) == (4, 1, 1, 1, 1)
    assert [f.test_id for f in r.failure_details] == ["t::b", "t::c"]


def test_only_the_named_pytest_plugins_are_loaded() -> None:
    """A plugin installed where the worker runs does not leak into a verification."""
    probe = (
        b"def test_plugins(pytestconfig):\n"
        b"    plugins = pytestconfig.pluginmanager.get_plugins()\n"
        b"    mods = {getattr(p, '__name__', '') for p in plugins}\n"
        b"    assert 'pytest_timeout' not in mods\n"
        b"    assert 'hypothesis.extra.pytestplugin' not in mods\n"
    )
    results, _ = run_contract_tests(
        LocalSandbox(),
        implementation={"src/adder.py": b"def add(a, b):\n    return a + b\n"},
        tests={"tests/contract_test.py": probe},
        environment=ENV,
        timeout_s=60,
    )
    assert results.all_passed, results.failure_details
    asks_for_timeout = ENV.model_copy(update={"pytest_plugins": ["pytest_timeout"]})
    results, _ = run_contract_tests(
        LocalSandbox(),
        implementation={"src/adder.py": b"def add(a, b):\n    return a + b\n"},
        tests={"tests/contract_test.py": probe},
        environment=asks_for_timeout,
        timeout_s=60,
    )
    assert not results.all_passed  # now it is loaded, as asked


class _Writes:
    """An agent that writes the given implementation files."""

    name = "fixed"

    def __init__(self, files: dict[str, bytes]) -> None:
        self.files = files

    def produce(self, request: AgentRequest) -> AgentOutput:
        return AgentOutput(files=self.files)


def test_a_verification_killed_at_its_timeout_says_so_and_after_how_long() -> None:
    store = ArtifactStore(MemoryBlobStore())
    hang = b"import time\n\ndef test_adds():\n    time.sleep(60)\n"
    task = TaskMessage(
        run_id="r1",
        component_id="adder",
        phase=Phase.IMPLEMENT,
        attempt=1,
        verify_inputs={"tests": store.put_bundle({"tests/contract_test.py": hang})},
        environment=ENV,
        timeout_s=1,
    )
    agent = _Writes({"src/adder.py": b"def add(a, b):\n    return a + b\n"})
    result = execute_task(task, agent=agent, sandbox=LocalSandbox(), store=store)
    assert (result.outcome, result.error_type) == ("error", TESTS_FAILED)
    # The error text is what the run's summary, `pact status` and the audit log show.
    assert (
        result.error == "TimeoutError: the contract tests were killed after 1 s (verify_timeout_s)"
    )
    # The systemic-failure detector still sees a timeout in the results.
    assert result.test_results is not None
    assert failure_signature(result.test_results) == (
        "timeout",
        "TimeoutError: the contract tests were killed after N s (verify_timeout_s)",
    )


def test_a_failed_test_run_leads_its_summary_with_the_harness_reason() -> None:
    no_report = TestResults(
        errors=1,
        failure_details=[TestFailure(test_id="<harness>", error_message="pytest wrote no report")],
    )
    assert no_report.summary() == "pytest wrote no report"
    not_believed = TestResults(
        total=2,
        passed=2,
        errors=1,
        failure_details=[TestFailure(test_id="<harness>", error_message="pytest exited with 1")],
    )
    assert not_believed.summary() == "pytest exited with 1; 2/2 passed, 0 failed, 1 errors"
    ordinary = TestResults(
        total=2, passed=1, failed=1, failure_details=[TestFailure(test_id="t::a")]
    )
    assert ordinary.summary() == "1/2 passed, 1 failed, 0 errors"


def test_failing_test_ids_take_pacts_form_path_class_test() -> None:
    suite = (
        b"class TestA:\n"
        b"    def test_x(self):\n        assert 0\n"
        b"    class TestInner:\n"
        b"        def test_n(self):\n            assert 0\n"
        b"\n"
        b"def test_y():\n    assert 0\n"
    )
    results, _ = run_contract_tests(
        LocalSandbox(),
        implementation={"src/adder.py": b"def add(a, b):\n    return a + b\n"},
        tests={"tests/contract_test.py": suite},
        environment=ENV,
        timeout_s=60,
    )
    assert sorted(f.test_id for f in results.failure_details) == [
        "tests/contract_test.py::TestA::TestInner::test_n",
        "tests/contract_test.py::TestA::test_x",
        "tests/contract_test.py::test_y",
    ]


def test_test_suites_are_parsed_one_at_a_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """The in-process executor verifies attempts in threads, and CPython 3.11's AST
    construction keeps one depth counter per interpreter that every parse resets: two
    parses at once fail with "AST constructor recursion depth mismatch". So no two
    ``count_tests`` parse at the same time."""
    import ast
    import threading

    parse = ast.parse
    inside, most = [0], [0]
    both_in = threading.Event()

    def watched(source: str, *args: object, **kwargs: object) -> ast.Module:
        inside[0] += 1
        most[0] = max(most[0], inside[0])
        if inside[0] == 2:
            both_in.set()
        both_in.wait(0.5)  # long enough for the other thread to come in, if it can
        inside[0] -= 1
        return parse(source)

    monkeypatch.setattr(ast, "parse", watched)
    source = "def test_a():\n    pass\n"
    counts: list[int] = []
    threads = [threading.Thread(target=lambda: counts.append(count_tests(source))) for _ in "ab"]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert counts == [1, 1]
    assert most[0] == 1


def test_a_parse_upset_by_another_threads_parse_is_tried_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A parse outside the harness's lock (a traceback formatted in another thread) can
    still reset the depth counter of one in progress: that parse is tried once more."""
    import ast

    parse = ast.parse
    calls: list[str] = []

    def upset_once(source: str, *args: object, **kwargs: object) -> ast.Module:
        calls.append(source)
        if len(calls) == 1:
            raise SystemError("AST constructor recursion depth mismatch (before=33, after=30)")
        return parse(source)

    monkeypatch.setattr(ast, "parse", upset_once)
    assert count_tests("def test_a():\n    pass\n") == 1
    assert len(calls) == 2
