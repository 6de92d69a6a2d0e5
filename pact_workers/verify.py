"""The harness: it decides whether an agent's output is acceptable.

Nothing an agent says about its own output is trusted. Contracts are parsed
against the schema, test suites must contain tests, and implementations are
judged by running the contract tests with pytest in a sandbox and reading the
JUnit XML that pytest wrote.

The harness adds checks of its own that no agent writes: a contract's dependency
names are probed for importability in the sandbox that verifies it (``probes``),
and a function with a performance budget gets a timing test (``budget_plugin``)
that runs after the contract tests.
"""

from __future__ import annotations

import ast
import json
import re
import secrets
import threading
import xml.etree.ElementTree as ET
from collections.abc import Mapping
from datetime import UTC, datetime
from importlib import resources

from pydantic import ValidationError

from pact_workers.errors import VerificationError
from pact_workers.models.contract import ComponentContract
from pact_workers.models.environment import EnvironmentSpec
from pact_workers.models.testing import HARNESS_TEST_ID, TestFailure, TestResults
from pact_workers.sandbox.base import Sandbox, SandboxRequest, SandboxResult

CONTRACT_FILE = "interface.json"
TESTS_DIR = "tests"
SRC_DIR = "src"

#: Top-level module names an implementation may not define: they would replace
#: the harness's own tools on PYTHONPATH.
RESERVED_MODULES = frozenset(
    {
        "pytest",
        "_pytest",
        "pluggy",
        "iniconfig",
        "conftest",
        "sitecustomize",
        "usercustomize",
        "pact_budget_plugin",
    }
)

#: The harness's budget plugin, as the module name it has in the workspace.
BUDGET_PLUGIN = "pact_budget_plugin"
BUDGET_SPEC = "pact_budgets.json"
BUDGET_TESTS = f"{TESTS_DIR}/pact_budget_test.py"

MAX_DETAIL_CHARS = 4000


def verify_contract(files: Mapping[str, bytes], component_id: str) -> ComponentContract:
    """Parse ``interface.json`` as a ComponentContract for ``component_id``."""
    raw = files.get(CONTRACT_FILE)
    if raw is None:
        raise VerificationError(f"component {component_id!r}: the agent wrote no {CONTRACT_FILE}")
    try:
        contract = ComponentContract.model_validate_json(raw)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'contract'}: {e['msg']}"
            for e in exc.errors()[:10]
        )
        raise VerificationError(
            f"component {component_id!r}: invalid contract: {problems}"
        ) from exc
    if contract.component_id != component_id:
        raise VerificationError(
            f"component {component_id!r}: contract names component {contract.component_id!r}"
        )
    return contract


#: One ``ast.parse`` at a time in this process. CPython 3.11 keeps the depth counter
#: that checks AST construction per interpreter, not per thread, and each parse resets
#: it when it starts: a parse in another thread (the in-process executor verifies
#: attempts in threads) while one is building its tree makes that one fail with
#: "SystemError: AST constructor recursion depth mismatch" (CPython issue 106905).
#: A parse outside this lock (the traceback module parses source lines when it formats
#: a traceback in another thread) can still do it: such a parse is tried once more.
_PARSING = threading.Lock()


def count_tests(source: str) -> int:
    """Count pytest-style test functions (module level and in ``Test*`` classes)."""
    with _PARSING:
        try:
            tree = ast.parse(source)
        except SystemError:
            tree = ast.parse(source)
    count = 0
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name.startswith(
            "test"
        ):
            count += 1
        elif isinstance(node, ast.ClassDef) and node.name.startswith("Test"):
            count += sum(
                isinstance(m, ast.FunctionDef | ast.AsyncFunctionDef) and m.name.startswith("test")
                for m in node.body
            )
    return count


def verify_test_suite(files: Mapping[str, bytes], component_id: str) -> int:
    """Check the test author's files: Python under ``tests/`` with at least one test."""
    tests = {p: d for p, d in files.items() if p.startswith(f"{TESTS_DIR}/") and p.endswith(".py")}
    if not tests:
        raise VerificationError(f"component {component_id!r}: no test files under {TESTS_DIR}/")
    stray = sorted(p for p in files if not p.startswith(f"{TESTS_DIR}/"))
    if stray:
        raise VerificationError(
            f"component {component_id!r}: test author wrote files outside {TESTS_DIR}/: {stray}"
        )
    total = 0
    for path, data in tests.items():
        try:
            total += count_tests(data.decode("utf-8"))
        except (SyntaxError, UnicodeDecodeError) as exc:
            raise VerificationError(f"component {component_id!r}: {path}: {exc}") from exc
    if total == 0:
        raise VerificationError(f"component {component_id!r}: the test suite defines no tests")
    return total


def check_implementation_files(files: Mapping[str, bytes], component_id: str) -> None:
    """Implementations live under ``src/`` and may not shadow the harness's modules."""
    if not files:
        raise VerificationError(f"component {component_id!r}: the agent wrote no files")
    stray = sorted(p for p in files if not p.startswith(f"{SRC_DIR}/"))
    if stray:
        raise VerificationError(
            f"component {component_id!r}: implementation files outside {SRC_DIR}/: {stray}"
        )
    for path in files:
        top = path.split("/")[1].removesuffix(".py")
        if top in RESERVED_MODULES:
            raise VerificationError(
                f"component {component_id!r}: {path} would shadow the harness module {top!r}"
            )


def run_contract_tests(
    sandbox: Sandbox,
    *,
    implementation: Mapping[str, bytes],
    tests: Mapping[str, bytes],
    environment: EnvironmentSpec,
    timeout_s: float,
    contract: ComponentContract | None = None,
) -> tuple[TestResults, SandboxResult]:
    """Run the contract tests against the staged implementation; never trust the agent.

    With ``contract``, the functions it gives a performance budget get the harness's
    own budget tests (:func:`budget_files`), run after the contract tests.
    """
    report = f".pact-report-{secrets.token_hex(8)}.xml"
    budgets = budget_files(contract) if contract is not None else {}
    # The harness's files come last: nothing an agent wrote may replace them.
    files = {**implementation, **tests, **budgets}
    request = SandboxRequest(
        command=[
            "{python}",
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            *[arg for plugin in environment.pytest_plugins for arg in ("-p", plugin)],
            *(["-p", BUDGET_PLUGIN] if budgets else []),
            f"--junitxml={report}",
            "-o",
            "junit_family=xunit1",
            TESTS_DIR,
        ],
        files=files,
        # A verification is hermetic: only the plugins the environment names are loaded,
        # not whatever else happens to be installed where the worker runs.
        environment=environment.model_copy(
            update={
                "env_vars": {
                    **environment.env_vars,
                    "PYTHONDONTWRITEBYTECODE": "1",
                    "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
                }
            }
        ),
        pythonpath=[SRC_DIR],
        timeout_s=timeout_s,
        collect=[report],
        network=False,
    )
    result = sandbox.run(request)
    if result.timed_out:
        # "TimeoutError" is what the systemic-failure detector recognises a timeout by.
        message = (
            f"TimeoutError: the contract tests were killed after {_seconds(timeout_s)} s "
            "(verify_timeout_s)"
        )
        return _harness_failure(message, result), result
    xml = result.files.get(report)
    if xml is None:
        message = f"pytest wrote no report (exit code {result.exit_code})"
        return _harness_failure(message, result), result
    results = parse_junit(xml)
    if results.all_passed and result.exit_code != 0:
        # The report says green but pytest did not: do not believe the report.
        results = results.model_copy(
            update={
                "errors": results.errors + 1,
                "failure_details": [
                    *results.failure_details,
                    TestFailure(
                        test_id=HARNESS_TEST_ID,
                        error_message=f"pytest exited with {result.exit_code}",
                        stderr=result.stderr[-MAX_DETAIL_CHARS:],
                    ),
                ],
            }
        )
    return results, result


def budget_files(contract: ComponentContract) -> dict[str, bytes]:
    """The harness's budget check for ``contract``: the plugin, the budgets, the tests.

    One test per ``p95_latency_ms`` and per ``max_memory_mb``; ``complexity`` is
    documentation and gets none. Empty when no function has a measurable budget.
    """
    latency: list[tuple[str, int]] = []
    memory: list[tuple[str, int]] = []
    for function in contract.functions:
        budget = function.performance_budget
        if budget is None:
            continue
        if budget.p95_latency_ms is not None:
            latency.append((function.name, budget.p95_latency_ms))
        if budget.max_memory_mb is not None:
            memory.append((function.name, budget.max_memory_mb))
    if not latency and not memory:
        return {}
    names = list(dict.fromkeys(name for name, _ in [*latency, *memory]))
    spec = {"module": contract.component_id, "functions": names}
    lines = [
        f'"""Performance budgets of {contract.component_id!r}, checked by the harness."""',
        "",
        f"import {BUDGET_PLUGIN} as budget",
    ]
    for name, ms in latency:
        lines += ["", "", f"def test_{_ident(name)}_p95_latency_within_{ms}_ms():"]
        lines.append(f"    budget.check_latency({name!r}, {ms})")
    for name, mb in memory:
        lines += ["", "", f"def test_{_ident(name)}_peak_memory_within_{mb}_mb():"]
        lines.append(f"    budget.check_memory({name!r}, {mb})")
    plugin = resources.files("pact_workers").joinpath("budget_plugin.py").read_bytes()
    return {
        f"{BUDGET_PLUGIN}.py": plugin,
        BUDGET_SPEC: json.dumps(spec, indent=2).encode(),
        BUDGET_TESTS: ("\n".join(lines) + "\n").encode(),
    }


def _ident(name: str) -> str:
    return re.sub(r"\W", "_", name).strip("_") or "function"


def _harness_failure(message: str, result: SandboxResult) -> TestResults:
    """Results for a test run that produced no report: 0 tests, one harness error."""
    return TestResults(
        total=0,
        errors=1,
        failure_details=[
            TestFailure(
                test_id=HARNESS_TEST_ID,
                error_message=message,
                stdout=result.stdout[-MAX_DETAIL_CHARS:],
                stderr=result.stderr[-MAX_DETAIL_CHARS:],
            )
        ],
        timestamp=_now(),
    )


def _seconds(value: float) -> str:
    """``300`` rather than ``300.0``; ``0.5`` stays as it is."""
    return f"{value:.0f}" if float(value).is_integer() else f"{value:g}"


def parse_junit(xml: bytes) -> TestResults:
    """Turn pytest's JUnit XML into TestResults."""
    try:
        root = ET.fromstring(xml)
    except ET.ParseError as exc:
        raise VerificationError(f"unreadable JUnit report: {exc}") from exc
    total = passed = failed = errors = skipped = 0
    details: list[TestFailure] = []
    for case in root.iter("testcase"):
        total += 1
        test_id = pact_test_id(case.get("file"), case.get("classname", ""), case.get("name", ""))
        outcome = None
        for child in case:
            if child.tag in {"failure", "error", "skipped"}:
                outcome = child
                break
        if outcome is None:
            passed += 1
            continue
        if outcome.tag == "skipped":
            skipped += 1
            continue
        if outcome.tag == "failure":
            failed += 1
        else:
            errors += 1
        details.append(
            TestFailure(
                test_id=test_id,
                error_message=(outcome.get("message") or "")[:MAX_DETAIL_CHARS],
                stdout=(outcome.text or "")[-MAX_DETAIL_CHARS:],
            )
        )
    return TestResults(
        total=total,
        passed=passed,
        failed=failed,
        errors=errors,
        skipped=skipped,
        failure_details=details,
        timestamp=_now(),
    )


def pact_test_id(file: str | None, classname: str, name: str) -> str:
    """A test's id in Pact's (and pytest's) form, ``path::Class::test``, from a JUnit
    testcase: ``file="tests/contract_test.py" classname="tests.contract_test.TestA"``
    gives ``tests/contract_test.py::TestA::test_x``. Without a file (another writer of
    JUnit XML) the id stays ``classname::name``."""
    if not file:
        return f"{classname}::{name}"
    module = file.removesuffix(".py").replace("/", ".")
    inner = classname[len(module) + 1 :] if classname.startswith(f"{module}.") else ""
    return "::".join([file, *[part for part in inner.split(".") if part], name])


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def contract_json(contract: ComponentContract) -> bytes:
    return json.dumps(contract.model_dump(mode="json"), indent=2).encode() + b"\n"
