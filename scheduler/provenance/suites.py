"""What a run's promoted contracts and test suites hold, for its retrospective (6.4):
test functions per component, error cases per contract, and the largest of each."""

from __future__ import annotations

import os
import re
from pathlib import Path

from pydantic import ValidationError

from pact_workers.models.contract import ComponentContract
from scheduler.provenance.baseline import files_below

#: A test function in a suite (module level or in a class).
_TEST_DEF = re.compile(r"^\s*(?:async\s+)?def\s+test_\w*\s*\(", re.MULTILINE)


def suite_sizes(pact: Path) -> dict[str, int]:
    """Test functions per component, counted in every ``.py`` file under its
    ``tests/`` (directories that are symbolic links not entered)."""
    sizes: dict[str, int] = {}
    contracts = os.fspath(pact / "contracts")
    try:
        names = os.listdir(contracts)
    except OSError:
        return sizes
    for name in names:  # plain strings: pathlib's glob took most of this at scale
        tests = f"{contracts}/{name}/tests"
        if os.path.isdir(tests):
            sizes[name] = _count_tests(tests)
    return sizes


def _count_tests(tests: str) -> int:
    count = 0
    for _, entry in files_below(tests):
        if entry.name.endswith(".py"):
            try:
                with open(entry.path, encoding="utf-8") as fh:
                    count += len(_TEST_DEF.findall(fh.read()))
            except (OSError, UnicodeDecodeError):
                continue
    return count


def error_cases(pact: Path) -> dict[str, int]:
    """Error cases per component, over its contract's functions (a contract that
    cannot be read or parsed is left out)."""
    found: dict[str, int] = {}
    for interface in sorted((pact / "contracts").glob("*/interface.json")):
        try:
            contract = ComponentContract.model_validate_json(interface.read_bytes())
        except (OSError, ValidationError):
            continue
        found[interface.parent.name] = sum(len(f.error_cases) for f in contract.functions)
    return found


def largest(counts: dict[str, int]) -> tuple[str, int]:
    """The (id, count) with the highest count; ("", 0) for none."""
    if not counts:
        return ("", 0)
    # Ties go to the first id in order, so the answer does not depend on the disk.
    return max(sorted(counts.items()), key=lambda kv: kv[1])
