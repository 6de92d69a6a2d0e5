"""Building directories laid out as Pact lays out its projects, for the front-door tests.

From the bundled example: ``.pact/decomposition/tree.json``, per component
``contracts/<c>/interface.json`` and ``contracts/<c>/tests/contract_test.py``,
``implementations/<c>/src/`` and ``implementations/<c>/test_results.json`` holding the
counts Pact would have recorded: every test passes, except where the evaluator's first
implementation (floor division for ``/`` on two ints) is used: 11 of its own 13 tests
pass, and one test each of ``evaluation`` and ``calculator``, which integrate it, fails.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from pact_workers.verify import count_tests

#: The component given its failing first implementation, and its recorded counts.
FAILING = "evaluator"
FAILING_COUNTS = {"total": 13, "passed": 11, "failed": 2, "errors": 0}
#: What the components integrating it record (one division test each fails).
INTEGRATING_COUNTS = {
    "evaluation": {"total": 7, "passed": 6, "failed": 1, "errors": 0},
    "calculator": {"total": 12, "passed": 11, "failed": 1, "errors": 0},
}


def recorded(total: int, passed: int, failed: int, errors: int) -> dict[str, object]:
    """Pact's test_results.json (its optional fields left out, as Pact may)."""
    return {"total": total, "passed": passed, "failed": failed, "errors": errors}


def pact_project_from_example(example: Path, root: Path, *, only: tuple[str, ...] = ()) -> Path:
    """A Pact project at ``root`` (``root/.pact``) built from the example's artifacts;
    ``only``: these components' contracts, tests and implementations (all by default;
    the tree stays whole)."""
    pact = root / ".pact"
    (pact / "decomposition").mkdir(parents=True)
    shutil.copyfile(example / "tree.json", pact / "decomposition" / "tree.json")
    replay = example / "replay"
    tree = json.loads((example / "tree.json").read_text())
    for cid in only or tree["nodes"]:
        source = replay / cid
        contract_dir = pact / "contracts" / cid
        (contract_dir / "tests").mkdir(parents=True)
        shutil.copyfile(source / "interface.json", contract_dir / "interface.json")
        test_file = source / "tests" / "contract_test.py"
        shutil.copyfile(test_file, contract_dir / "tests" / "contract_test.py")
        impl = pact / "implementations" / cid
        src = source / "attempts" / "implement-1" / "src" if cid == FAILING else source / "src"
        shutil.copytree(src, impl / "src")
        if cid == FAILING:
            counts = recorded(**FAILING_COUNTS)
        elif cid in INTEGRATING_COUNTS:
            counts = recorded(**INTEGRATING_COUNTS[cid])
        else:
            total = count_tests(test_file.read_text())
            counts = recorded(total, total, 0, 0)
        (impl / "test_results.json").write_text(json.dumps(counts, indent=2))
    return root


def files_of(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` with its bytes (to show that nothing was written)."""
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}
