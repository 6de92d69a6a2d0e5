"""The harness: contracts, test suites and test runs are checked, never trusted."""

from __future__ import annotations

import json
import sys

import pytest

from pact_workers.errors import VerificationError
from pact_workers.models import EnvironmentSpec
from pact_workers.sandbox import LocalSandbox
from pact_workers.verify import (
    check_implementation_files,
    count_tests,
    parse_junit,
    run_contract_tests,
    verify_contract,
    verify_test_suite,
)

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
