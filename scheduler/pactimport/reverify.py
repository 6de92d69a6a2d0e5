"""Re-verifying a Pact project's implementations with our harness (``pact verify``).

Each component that has contract tests, an implementation and recorded results is
verified as the run loop verifies an implementation: its contract tests run with
pytest in a sandbox (local or Docker) against its own ``src/`` and the sources of
every component it imports (its children and its dependencies, transitively). The
counts the harness measures (total, passed, failed, errors) are compared with the
counts Pact recorded; a component reproduces when all four are equal. Performance
budget tests are not added: Pact's recorded counts do not hold them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict

from pact_workers.models.environment import EnvironmentSpec
from pact_workers.models.testing import TestResults
from pact_workers.sandbox.base import Sandbox
from pact_workers.verify import run_contract_tests
from scheduler.pactimport.layout import PactProject

__all__ = ["Counts", "Reproduction", "import_closure", "reverify", "verifiable"]


class Counts(BaseModel):
    """The four counts a test run is compared by."""

    model_config = ConfigDict(frozen=True)

    total: int
    passed: int
    failed: int
    errors: int

    @classmethod
    def of(cls, results: TestResults) -> Counts:
        return cls(
            total=results.total,
            passed=results.passed,
            failed=results.failed,
            errors=results.errors,
        )

    def __str__(self) -> str:
        return f"{self.passed}/{self.total} passed, {self.failed} failed, {self.errors} errors"


@dataclass(frozen=True)
class Reproduction:
    """One component: what Pact recorded and what the harness measured again."""

    component: str
    recorded: Counts
    reproduced: Counts
    results: TestResults

    @property
    def match(self) -> bool:
        return self.recorded == self.reproduced

    def as_json(self) -> dict[str, object]:
        return {
            "component": self.component,
            "recorded": self.recorded.model_dump(),
            "reproduced": self.reproduced.model_dump(),
            "match": self.match,
        }


def import_closure(project: PactProject, component_id: str) -> list[str]:
    """Every component whose implementation ``component_id``'s tests may import: its
    children and dependencies (the tree's, and the contract's that are tree nodes),
    transitively."""
    tree = project.tree

    def direct(cid: str) -> list[str]:
        contract = project.components[cid].contract
        declared = list(contract.dependencies) if contract is not None else []
        named = [*tree.nodes[cid].dependencies, *declared, *tree.nodes[cid].children]
        return [d for d in named if d in tree.nodes]

    seen: dict[str, None] = {}
    todo = direct(component_id)
    while todo:
        cid = todo.pop()
        if cid in seen or cid == component_id:
            continue
        seen[cid] = None
        todo.extend(direct(cid))
    return sorted(seen)


def verifiable(project: PactProject) -> list[str]:
    """Components with contract tests, an implementation and recorded results."""
    return [
        cid
        for cid, comp in project.components.items()
        if comp.tests and comp.src and comp.recorded is not None
    ]


def reverify(
    project: PactProject,
    *,
    sandbox: Sandbox,
    environment: EnvironmentSpec,
    timeout_s: float,
    components: list[str] | None = None,
    on_component: Callable[[Reproduction], None] | None = None,
) -> list[Reproduction]:
    """Run every verifiable component's contract tests again (see the module docstring)."""
    found: list[Reproduction] = []
    for cid in components if components is not None else verifiable(project):
        component = project.components[cid]
        assert component.recorded is not None
        implementation: dict[str, bytes] = {}
        for other in import_closure(project, cid):
            for path, data in project.components[other].src.items():
                implementation.setdefault(path, data)
        implementation.update(component.src)
        results, _ = run_contract_tests(
            sandbox,
            implementation=implementation,
            tests=component.tests,
            environment=environment,
            timeout_s=timeout_s,
        )
        reproduction = Reproduction(
            component=cid,
            recorded=Counts.of(component.recorded),
            reproduced=Counts.of(results),
            results=results,
        )
        found.append(reproduction)
        if on_component is not None:
            on_component(reproduction)
    return found
