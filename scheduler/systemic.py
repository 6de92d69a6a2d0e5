"""Systemic failure detection: many components failing with one root cause (seed 000, 1.4).

Pure: it reads test results and returns a :class:`SystemicPattern` (what failed, where,
and the concrete fix) or None. The run loop calls it after every batch of results and
pauses the run — not fails it — when a pattern is found, because the fix is in the
environment, where a human must act.

Patterns, likeliest root cause first: ``provider_unreachable`` (agents that could not
reach the same model provider at all, described by ``scheduler.failures`` as a failure
whose message is the agent's :class:`~pact_workers.errors.ProviderUnreachable`),
``timeout``, ``import_error``, ``zero_tests``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from pact_workers.errors import UNREACHABLE_PREFIX
from pact_workers.models.testing import TestResults

__all__ = [
    "PATTERN_ORDER",
    "PatternType",
    "SystemicPattern",
    "detect_systemic_failure",
    "failure_signature",
]

PatternType = Literal["provider_unreachable", "timeout", "import_error", "zero_tests"]

#: Tie-break order when two patterns cover as many components: the likelier root cause first.
PATTERN_ORDER: tuple[PatternType, ...] = (
    "provider_unreachable",
    "timeout",
    "import_error",
    "zero_tests",
)

#: Import names whose PyPI distribution is called something else.
PYPI_NAMES = {
    "yaml": "PyYAML",
    "PIL": "Pillow",
    "cv2": "opencv-python",
    "sklearn": "scikit-learn",
    "bs4": "beautifulsoup4",
    "dateutil": "python-dateutil",
    "dotenv": "python-dotenv",
}

#: Components named in a recommendation before the rest are summarised as "and N more".
MAX_NAMED_COMPONENTS = 5

_TIMEOUT_MARKERS = ("TimeoutError", "timed out", "killed after")
_MISSING_MODULE = re.compile(r"(?:ModuleNotFoundError|ImportError): No module named '?([\w.]+)'?")
_CANNOT_IMPORT = re.compile(r"ImportError: (cannot import name '[^']+' from '[^']+')")
_OTHER_IMPORT = re.compile(r"ImportError: ([^\n]+)")
#: " (/tmp/ws-3/src/x/__init__.py)" differs per workspace; it must not split a signature.
_PATH_SUFFIX = re.compile(r"\s*\((?:/|[A-Za-z]:\\)[^)]*\)")
_DIGITS = re.compile(r"\d+")


@dataclass(frozen=True)
class SystemicPattern:
    """Identical failures across components, with the fix a human should apply."""

    pattern_type: str  # one of PATTERN_ORDER
    affected_components: list[str]
    sample_error: str
    recommendation: str


@dataclass(frozen=True)
class _Match:
    pattern_type: PatternType
    detail: str
    sample: str


def failure_signature(results: TestResults) -> tuple[str, str] | None:
    """The root-cause signature of one component's test results, if it has a systemic shape.

    Returns:
        ``("provider_unreachable", "host:port")`` when the agent could not reach its
        model provider at that address; ``("timeout", line)`` when a failure message
        reports a timeout (numbers masked);
        ``("import_error", "No module named 'x'")`` (or ``"cannot import name 'y' from
        'x'"``, or the ImportError text) when an import failed; ``("zero_tests", "")``
        when nothing was collected (total == 0, passed == 0) and nothing more specific
        applies; None for a genuine pass or an ordinary failing assertion.
    """
    match = _match(results)
    return None if match is None else (match.pattern_type, match.detail)


def detect_systemic_failure(
    results: Mapping[str, TestResults], threshold: int = 3
) -> SystemicPattern | None:
    """Detect when ``threshold`` or more components fail with the same root cause.

    Args:
        results: Test results by component id.
        threshold: How many components must share an identical signature.

    Returns:
        The pattern covering the most components (ties: provider_unreachable, timeout,
        import_error, zero_tests, then the first seen), or None when the failures are
        heterogeneous or fewer than ``threshold`` results were given.

    Raises:
        ValueError: ``threshold`` is less than 1.
    """
    if threshold < 1:
        raise ValueError(f"threshold must be at least 1, got {threshold}")
    if len(results) < threshold:
        return None
    groups: dict[tuple[PatternType, str], list[tuple[str, _Match]]] = {}
    for component_id, component_results in results.items():
        match = _match(component_results)
        if match is not None:
            groups.setdefault((match.pattern_type, match.detail), []).append((component_id, match))
    qualifying = [members for members in groups.values() if len(members) >= threshold]
    if not qualifying:
        return None
    # max() keeps the first of equal keys, so "first seen" is the last tie-break.
    best = max(
        qualifying,
        key=lambda members: (len(members), -PATTERN_ORDER.index(members[0][1].pattern_type)),
    )
    components = [component_id for component_id, _ in best]
    first = best[0][1]
    return SystemicPattern(
        pattern_type=first.pattern_type,
        affected_components=components,
        sample_error=first.sample,
        recommendation=_recommend(first, components),
    )


def _match(results: TestResults) -> _Match | None:
    if results.all_passed:
        return None
    return (
        _unreachable(results) or _timeout(results) or _import_error(results) or _zero_tests(results)
    )


def _unreachable(results: TestResults) -> _Match | None:
    # Before the timeout rule: a connect timeout is the provider's address, not a slow test.
    for failure in results.failure_details:
        message = failure.error_message.strip()
        if message.startswith(UNREACHABLE_PREFIX):
            endpoint = message[len(UNREACHABLE_PREFIX) :].split(" (", 1)[0].strip()
            return _Match("provider_unreachable", endpoint, message.splitlines()[0])
    return None


def _timeout(results: TestResults) -> _Match | None:
    for failure in results.failure_details:
        for line in failure.error_message.splitlines():
            if not any(marker in line for marker in _TIMEOUT_MARKERS):
                continue
            if line.lstrip().startswith(("AssertionError", "assert ")):
                # A component that implements timeouts may assert on the words; its
                # failing assertion is an ordinary failure, not a stalled run.
                continue
            detail = _DIGITS.sub("N", line.strip())
            return _Match("timeout", detail, line.strip())
    return None


def _import_error(results: TestResults) -> _Match | None:
    # pytest puts a collection error's traceback in the report body (our ``stdout``)
    # and only "collection failure" in the message, so every stream is searched.
    for failure in results.failure_details:
        text = "\n".join((failure.error_message, failure.stdout, failure.stderr))
        found = _MISSING_MODULE.search(text)
        if found:
            return _Match("import_error", f"No module named '{found[1]}'", found[0])
        found = _CANNOT_IMPORT.search(text)
        if found:
            return _Match("import_error", found[1], found[0])
        found = _OTHER_IMPORT.search(text)
        if found:
            detail = _PATH_SUFFIX.sub("", found[1]).strip()
            return _Match("import_error", detail, found[0].strip())
    return None


def _zero_tests(results: TestResults) -> _Match | None:
    if results.total != 0 or results.passed != 0:
        return None
    messages = [f.error_message for f in results.failure_details if f.error_message]
    sample = messages[0] if messages else f"no tests collected ({results.summary()})"
    return _Match("zero_tests", "", sample)


def _recommend(match: _Match, components: list[str]) -> str:
    where = f"{len(components)} components ({_name_components(components)})"
    if match.pattern_type == "provider_unreachable":
        return (
            f"the provider is unreachable from this worker: the agents of {where} could "
            f"not connect to {match.detail} at all. Restore the worker's network route to "
            "it (proxy, DNS, firewall) or wait for the provider to come back; if the "
            "address is wrong, fix base_url under agents: in pact.yaml. Then run "
            "`pact resume DIR`: the paused items start again with fresh retries."
        )
    if match.pattern_type == "zero_tests":
        return (
            f"pytest collected no tests on {where}: the harness most likely cannot run "
            "pytest. Check that `environment.python_path` in pact.yaml names an interpreter "
            "with pytest installed (`<python_path> -m pytest --version` must work), and that "
            "`pytest` is on PATH — add its directory to `environment.extra_path_dirs`. "
            "Then run `pact doctor` and resume the run."
        )
    if match.pattern_type == "import_error":
        return _recommend_import(match.detail, where)
    return (
        f"{where} timed out ({match.sample}). If the harness killed the test runs, raise "
        "`verify_timeout_s` in pact.yaml. If agent calls stalled, raise "
        "`role_timeouts.<role>` for that role (e.g. `role_timeouts: {code_author: 600}`) "
        "or set `impatience: patient` in pact.yaml. If calls to the model provider time "
        "out everywhere at once, check the network to the provider (proxy, DNS, firewall) "
        "before resuming."
    )


def _recommend_import(detail: str, where: str) -> str:
    missing = re.fullmatch(r"No module named '([\w.]+)'", detail)
    if missing:
        module = missing[1]
        top = module.split(".")[0]
        package = PYPI_NAMES.get(top, top)
        return (
            f"{where} fail with \"No module named '{module}'\": install the missing module "
            f"'{module}' in the sandbox environment (e.g. `{_pip('install', package)}` for "
            "environment.python_path) or, if it is part of the code base, add its directory "
            "to environment.extra_path_dirs / PYTHONPATH; or declare it in the contracts' "
            "external_dependencies."
        )
    wrong_name = re.fullmatch(r"cannot import name '([^']+)' from '([\w.]+)'", detail)
    if wrong_name:
        name, module = wrong_name[1], wrong_name[2]
        package = PYPI_NAMES.get(module.split(".")[0], module.split(".")[0])
        return (
            f"'{name}' cannot be imported from module '{module}' on {where}: if '{module}' "
            "is a third-party library, the installed version is wrong (e.g. "
            f"`{_pip('install --upgrade', package)}` for environment.python_path); if it is "
            f"part of the code base, the component that provides '{module}' does not export "
            f"'{name}' — check its contract, or add its directory to "
            "environment.extra_path_dirs / PYTHONPATH."
        )
    return (
        f"an import fails on {where} ({detail}): install the missing library in the sandbox "
        "environment (the interpreter named by environment.python_path), or, if it is part "
        "of the code base, add its directory to environment.extra_path_dirs / PYTHONPATH."
    )


def _pip(command: str, package: str) -> str:
    return f"<python_path> -m pip {command} {package}"


def _name_components(components: list[str]) -> str:
    named = ", ".join(components[:MAX_NAMED_COMPONENTS])
    rest = len(components) - MAX_NAMED_COMPONENTS
    return f"{named} and {rest} more" if rest > 0 else named
