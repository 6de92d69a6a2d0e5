"""Contract test suites and the results of running them (Pact's shapes)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class _Doc(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True)


class TestCase(_Doc):
    """One test case a test author derived from a contract."""

    __test__ = False  # not a pytest test class

    id: str
    description: str
    function: str
    category: Literal["happy_path", "edge_case", "error_case", "invariant"]
    setup_description: str = ""
    mock_dependencies: dict[str, str] = Field(default_factory=dict)
    input_values: dict[str, str] = Field(default_factory=dict)
    input_description: str = ""
    expected_output_description: str = ""
    expected_error: str = ""
    assertions: list[str] = Field(default_factory=list)


class ContractTestSuite(_Doc):
    """An executable test suite for one component's contract."""

    __test__ = False

    component_id: str
    contract_version: int = 1
    test_cases: list[TestCase] = Field(default_factory=list)
    test_language: str = "python"
    generated_code: str = ""


#: The test id of a failure of the test run itself (killed, no report), not of a test.
HARNESS_TEST_ID = "<harness>"


class TestFailure(_Doc):
    """One failing or erroring test."""

    __test__ = False

    test_id: str
    test_description: str = ""
    error_message: str = ""
    stdout: str = ""
    stderr: str = ""


class TestResults(_Doc):
    """The outcome of a test run, as the harness measured it."""

    __test__ = False

    total: int = Field(default=0, ge=0)
    passed: int = Field(default=0, ge=0)
    failed: int = Field(default=0, ge=0)
    errors: int = Field(default=0, ge=0)
    skipped: int = Field(default=0, ge=0)
    failure_details: list[TestFailure] = Field(default_factory=list)
    timestamp: str = ""

    @property
    def all_passed(self) -> bool:
        """True only when at least one test ran and none failed or errored (0/0 is not a pass)."""
        return self.total > 0 and self.failed == 0 and self.errors == 0 and self.passed > 0

    @property
    def harness_error(self) -> str:
        """Why the test run itself failed (killed at its timeout, no report), or ""."""
        return next(
            (f.error_message for f in self.failure_details if f.test_id == HARNESS_TEST_ID), ""
        )

    def summary(self) -> str:
        """One line for a run's failure: the counts, led by the harness's reason when the
        run itself failed (when no test ran, the counts say nothing and are left out)."""
        counts = f"{self.passed}/{self.total} passed, {self.failed} failed, {self.errors} errors"
        reason = self.harness_error
        if not reason:
            return counts
        return reason if self.total == 0 else f"{reason}; {counts}"
