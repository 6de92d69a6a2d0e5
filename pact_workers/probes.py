"""The import probe: which of a contract's dependency names are importable where it is verified.

The worker does not know the decomposition tree, so it probes every dependency name
an import statement could name, in the sandbox that verifies the contract (a Docker
run probes the image), and reports the answers as the contract's test results; the
scheduler reads them for the names that turn out to be no component of the tree
(``scheduler.validation``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Mapping
from datetime import UTC, datetime

from pact_workers.errors import VerificationError
from pact_workers.models.contract import ComponentContract
from pact_workers.models.environment import EnvironmentSpec
from pact_workers.models.testing import TestFailure, TestResults
from pact_workers.sandbox.base import Sandbox, SandboxRequest

#: Test id prefix of a probe's result.
IMPORT_PROBE_ID = "import::"
IMPORT_PROBE_TIMEOUT_S = 60.0

_MODULE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")

#: Run in the sandbox: whether each module named on the command line can be found.
#: ``find_spec`` locates a module without running it (a dotted name imports its parents).
_PROBE = """
import importlib.util, json, sys
found = {}
for name in sys.argv[1:]:
    try:
        found[name] = importlib.util.find_spec(name) is not None
    except Exception:
        found[name] = False
print(json.dumps(found))
"""


def import_candidates(contract: ComponentContract) -> list[str]:
    """The dependency names of ``contract`` that an import statement could name.

    The worker does not know the tree, so it probes every such name; the scheduler
    reads the answers only for the names that turn out to be no component.
    """
    names = [*contract.dependencies, *contract.external_dependencies]
    return [n for n in dict.fromkeys(names) if _MODULE_NAME.fullmatch(n)]


def probe_imports(
    sandbox: Sandbox, names: list[str], *, environment: EnvironmentSpec, timeout_s: float
) -> dict[str, bool]:
    """Whether each module of ``names`` is importable with ``environment`` in ``sandbox``.

    Raises:
        VerificationError: the probe could not run to the end.
    """
    if not names:
        return {}
    request = SandboxRequest(
        command=["{python}", "-c", _PROBE, *names],
        environment=environment,
        timeout_s=min(timeout_s, IMPORT_PROBE_TIMEOUT_S),
        network=False,
    )
    result = sandbox.run(request)
    last = result.stdout.strip().splitlines()[-1:] if result.stdout.strip() else []
    try:
        found = json.loads(last[0]) if last and not result.timed_out else None
    except ValueError:  # not JSON, or a number too long to convert
        found = None
    if not isinstance(found, dict):
        raise VerificationError(
            "the harness could not check which dependencies are importable (exit code "
            f"{result.exit_code}{', timed out' if result.timed_out else ''}): "
            f"{result.stderr.strip()[-500:]}"
        )
    return {name: bool(found.get(name)) for name in names}


def spec_component_ids(spec: Mapping[str, bytes]) -> set[str]:
    """The component ids a task's spec names: the component, its parent, its children and
    its dependencies (names a contract may use that are certainly no module to probe)."""
    try:
        doc = json.loads(spec.get("component.json", b"{}"))
    except ValueError:  # not JSON or not UTF-8, or a number too long to convert
        return set()
    if not isinstance(doc, dict):
        return set()
    dependencies = doc.get("dependencies")
    children = doc.get("children")
    ids: set[object] = {doc.get("component_id"), doc.get("parent_id")}
    if isinstance(dependencies, list):
        ids |= {d for d in dependencies if isinstance(d, str)}
    if isinstance(children, list):
        ids |= {c.get("component_id") for c in children if isinstance(c, dict)}
    return {i for i in ids if isinstance(i, str) and i}


def probe_contract_imports(
    sandbox: Sandbox,
    contract: ComponentContract,
    *,
    environment: EnvironmentSpec,
    timeout_s: float,
    known_ids: Collection[str] = (),
) -> TestResults | None:
    """The import probe of a contract's dependency names, as test results.

    One result per probed name (``import::<name>``): passed when importable. Names in
    ``known_ids`` (components the task's spec names) are not probed. None when nothing
    is left to probe.
    """
    names = [n for n in import_candidates(contract) if n not in known_ids]
    if not names:
        return None
    found = probe_imports(sandbox, names, environment=environment, timeout_s=timeout_s)
    missing = [n for n in names if not found[n]]
    return TestResults(
        total=len(names),
        passed=len(names) - len(missing),
        failed=len(missing),
        failure_details=[
            TestFailure(
                test_id=f"{IMPORT_PROBE_ID}{name}",
                error_message=f"{name!r} is not importable in the verification environment",
            )
            for name in missing
        ],
        timestamp=datetime.now(UTC).isoformat(timespec="seconds"),
    )


def importable_from_probe(
    contract: ComponentContract, results: TestResults | None
) -> dict[str, bool] | None:
    """Read :func:`probe_contract_imports`'s results back: importable by name.

    Names the probe skipped as known components read as importable (they resolve as
    components, so the answer is never used). None when there are no results: nothing
    was left to probe, or the result came from a worker that does not probe.
    """
    if results is None:
        return None
    missing = {
        f.test_id.removeprefix(IMPORT_PROBE_ID)
        for f in results.failure_details
        if f.test_id.startswith(IMPORT_PROBE_ID)
    }
    return {name: name not in missing for name in import_candidates(contract)}
