"""Before-run vs after-run: which tests regressed, and which files their tracebacks name."""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict

from pact_workers.models.testing import HARNESS_TEST_ID, TestFailure, TestResults

#: ``File "src/lexer.py", line 3`` (a Python traceback) and ``src/lexer.py:3:`` (pytest's
#: short form); paths are kept as the traceback gives them, made relative below.
_TRACE_PATH = re.compile(r'File "([^"]+)", line \d+|^([^\s:"\']+\.py):\d+:', re.MULTILINE)
#: Where the harness lays out a verification: sources under ``src/``, tests under ``tests/``.
_ROOTS = ("src/", "tests/")


class Finding(BaseModel):
    """One test that passed before and fails after."""

    model_config = ConfigDict(frozen=True)

    test_id: str
    message: str = ""
    #: Project-relative paths its traceback names (``src/lexer.py``); empty: none found.
    paths: tuple[str, ...] = ()


def paths_in(text: str) -> tuple[str, ...]:
    """The source paths a traceback names, relative to the verification's root
    (``src/...`` or ``tests/...``), without the interpreter's own files."""
    found: dict[str, None] = {}
    for match in _TRACE_PATH.finditer(text):
        raw = match.group(1) or match.group(2) or ""
        rel = _relative(raw)
        if rel:
            found[rel] = None
    return tuple(found)


def _relative(path: str) -> str:
    path = path.replace("\\", "/")
    for root in _ROOTS:
        if path.startswith(root):
            return path
        marker = f"/{root}"
        if marker in path:
            return root + path.rsplit(marker, 1)[1]
    return ""  # a library's or the interpreter's file: not the workspace's


def _failing(results: TestResults) -> dict[str, TestFailure]:
    return {f.test_id: f for f in results.failure_details if f.test_id != HARNESS_TEST_ID}


def compare_runs(before: TestResults, after: TestResults) -> list[Finding]:
    """Tests failing after that did not fail before (ordered by test id).

    A harness failure after (the run was killed, no report) while the before-run
    passed is one path-less finding: it cannot be attributed, so it counts as intent.
    """
    failed_before = _failing(before)
    findings = [
        Finding(
            test_id=test_id,
            message=failure.error_message,
            paths=paths_in("\n".join((failure.error_message, failure.stdout, failure.stderr))),
        )
        for test_id, failure in sorted(_failing(after).items())
        if test_id not in failed_before
    ]
    if after.harness_error and not before.harness_error:
        findings.append(Finding(test_id=HARNESS_TEST_ID, message=after.harness_error))
    return findings
