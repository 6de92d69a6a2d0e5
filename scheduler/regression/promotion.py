"""The regression check at promotion: before an implementation or integration is
promoted, the tests of what already depends on it run again against it.

Two checks, both before anything is written into the project:

1. Expired verification: the attempt was verified against the implementation
   closure it was dispatched with (the digest of ``deps_src``); when another
   component was promoted in between, that verification is ``expired`` and the
   contract tests run again against the current closure. Nothing is promoted on a
   stale verification.
2. Regressions: for every done component whose implementation closure includes this
   one, its contract tests run again with this attempt's files in place of the
   promoted ones (after), and are compared with the results stored when it was
   verified (before). The intent scope is this component's files and, for an
   integration, its children's (:func:`scheduler.regression.check_patch_contract`).

The runs use a local sandbox on the scheduler's host. Dependents are found by
walking up from this component through done components only: a component that is
not done has no verified results to regress, and when it is promoted again its own
dependents are checked against it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from pact_workers.artifacts import ArtifactStore, Bundle, digest_bytes
from pact_workers.errors import PactError
from pact_workers.models.environment import EnvironmentSpec
from pact_workers.models.testing import HARNESS_TEST_ID, TestFailure, TestResults
from pact_workers.models.work import ErrorClass, ItemStatus, Phase, ResultMessage
from pact_workers.runner import TESTS_FAILED
from pact_workers.sandbox.base import Sandbox
from pact_workers.sandbox.local import LocalSandbox
from pact_workers.verify import run_contract_tests
from scheduler.inputs import closure_sources, implementation_closure
from scheduler.project import ProjectDir
from scheduler.regression.baseline import detect_baseline_abuse
from scheduler.regression.compare import Finding
from scheduler.regression.contract import (
    Intent,
    PatchStatus,
    PatchVerdict,
    check_patch_contract,
)
from scheduler.regression.events import RegressionChecked
from scheduler.state import RunState, final_phase

#: ``error_type`` of an attempt whose promotion the regression check refused: the
#: harness's ``tests_failed``, so that the failure policy retries it with feedback.
REGRESSION_ERROR = TESTS_FAILED

_CHECKED = (Phase.IMPLEMENT, Phase.INTEGRATE)


@dataclass(frozen=True)
class PromotionCheck:
    """What the checks found: the events to log, and the failure when refused."""

    events: list[RegressionChecked]
    failure: ResultMessage | None = None


def check_promotion(
    state: RunState,
    store: ArtifactStore,
    project: ProjectDir,
    result: ResultMessage,
    *,
    environment: EnvironmentSpec,
    timeout_s: float,
    sandbox: Sandbox | None = None,
    users: Callable[[str], Iterable[str]] | None = None,
) -> PromotionCheck | None:
    """Both checks for one verified ``result``; None when there was nothing to check.
    ``users`` as for :func:`dependents_of`."""
    if result.phase not in _CHECKED or result.output is None or state.tree is None:
        return None
    cid, phase = result.component_id, result.phase
    events: list[RegressionChecked] = []
    sandbox = sandbox or LocalSandbox()
    base = {"component_id": cid, "phase": phase, "attempt": result.attempt}
    verified_against = state.item(cid, phase).verify_closure
    if verified_against:
        current = closure_sources(state, store, cid)
        if current and current != verified_against:
            again = _run(
                sandbox,
                store,
                own=store.get_bundle(result.output),
                deps=store.get_bundle(current),
                tests=store.get_bundle(state.item(cid, Phase.TEST).output or ""),
                environment=environment,
                timeout_s=timeout_s,
            )
            passed = again.all_passed
            events.append(
                RegressionChecked(
                    **base,
                    status=PatchStatus.EXPIRED,
                    reason="verified against a closure that changed since; verified again: "
                    + ("passed" if passed else again.summary()),
                    verified_against=verified_against,
                    current_closure=current,
                    reverified=passed,
                )
            )
            if not passed:
                return PromotionCheck(events, _failure(result, again, "expired"))
    dependents = dependents_of(state, cid, users)
    if not dependents:
        return PromotionCheck(events) if events else None
    candidate = store.get_bundle(result.output)
    intent = _intent(state, store, cid, phase, candidate)
    verdicts: dict[str, PatchVerdict] = {}
    for dependent in dependents:
        item = state.item(dependent, final_phase(state.tree, dependent))
        tests_item = state.item(dependent, Phase.TEST)
        after = _run(
            sandbox,
            store,
            own=store.get_bundle(item.output or ""),
            deps=_closure(state, store, dependent, replace=(cid, candidate)),
            tests=store.get_bundle(tests_item.output or ""),
            environment=environment,
            timeout_s=timeout_s,
        )
        verdicts[dependent] = check_patch_contract(
            "verify", intent=intent, before=item.test_results, after=after
        )
    event = _aggregate(base, verdicts, project, state)
    events.append(event)
    if event.status is PatchStatus.VIOLATED:
        details = [
            TestFailure(test_id=f.test_id, error_message=f.message[:2000])
            for f in event.intent_regressions
        ]
        failed = TestResults(total=len(details), failed=len(details), failure_details=details)
        return PromotionCheck(events, _failure(result, failed, "violated", event.reason))
    return PromotionCheck(events)


def dependents_of(
    state: RunState, component_id: str, users: Callable[[str], Iterable[str]] | None = None
) -> list[str]:
    """Done components whose implementation closure includes ``component_id``
    (walking up through done components only; see the module docstring).

    ``users(c)`` names the components that depend on ``c`` directly; the run loop
    passes its work graph's (kept up to date edge by edge), so a promotion costs what
    it walks, not a pass over every dependency of the run. Without it the inverse is
    built here from ``state.dependencies``.
    """
    assert state.tree is not None
    if users is None:
        inverse: dict[str, list[str]] = {}
        for cid, deps in state.dependencies.items():
            for dep in deps:
                inverse.setdefault(dep, []).append(cid)
        users = lambda c: inverse.get(c, ())  # noqa: E731
    found: dict[str, None] = {}
    todo = [component_id]
    while todo:
        current = todo.pop()
        node = state.tree.nodes[current]
        above = [*users(current), *([node.parent_id] if node.parent_id else [])]
        for cid in above:
            if cid in found or cid == component_id or cid not in state.tree.nodes:
                continue
            if state.item(cid, final_phase(state.tree, cid)).status is not ItemStatus.DONE:
                continue
            if component_id in implementation_closure(state, cid):
                found[cid] = None
                todo.append(cid)
    return sorted(found)


def _intent(
    state: RunState, store: ArtifactStore, cid: str, phase: Phase, candidate: Bundle
) -> Intent:
    """This component's files (new and promoted) and, for an integration, its children's."""
    assert state.tree is not None
    own = set(candidate)
    promoted = state.item(cid, phase).output
    if promoted:
        own |= set(store.get_manifest(promoted))
    related: set[str] = set()
    if phase is Phase.INTEGRATE:
        for child in state.tree.nodes[cid].children:
            output = state.item(child, final_phase(state.tree, child)).output
            if output:
                related |= set(store.get_manifest(output))
    return Intent(allowed_files=tuple(sorted(own)), allowed_related=tuple(sorted(related)))


def _closure(
    state: RunState, store: ArtifactStore, component_id: str, *, replace: tuple[str, Bundle]
) -> Bundle:
    """The merged sources ``component_id`` imports, with one component's files replaced."""
    assert state.tree is not None
    merged: Bundle = {}
    for cid in implementation_closure(state, component_id):
        if cid == replace[0]:
            files: Mapping[str, bytes] = replace[1]
        else:
            output = state.item(cid, final_phase(state.tree, cid)).output
            files = store.get_bundle(output) if output else {}
        merged.update(files)
    return merged


def _run(
    sandbox: Sandbox,
    store: ArtifactStore,
    *,
    own: Bundle,
    deps: Bundle,
    tests: Bundle,
    environment: EnvironmentSpec,
    timeout_s: float,
) -> TestResults:
    """Run contract tests; a run that cannot be made is one harness failure (path-less,
    so it counts against the change)."""
    try:
        results, _ = run_contract_tests(
            sandbox,
            implementation={**deps, **own},
            tests=tests,
            environment=environment,
            timeout_s=timeout_s,
        )
    except PactError as exc:
        return TestResults(
            total=0,
            errors=1,
            failure_details=[TestFailure(test_id=HARNESS_TEST_ID, error_message=str(exc))],
        )
    return results


def _aggregate(
    base: dict[str, object],
    verdicts: dict[str, PatchVerdict],
    project: ProjectDir,
    state: RunState,
) -> RegressionChecked:
    """One event for all dependents: findings named after their component, the worst
    status (violated, then unverified, then accepted with external changes)."""
    intent: list[Finding] = []
    external: list[Finding] = []
    for dependent, verdict in verdicts.items():
        intent += [_named(dependent, f) for f in verdict.intent_regressions]
        external += [_named(dependent, f) for f in verdict.external_regressions]
    statuses = {v.status for v in verdicts.values()}
    status = next(
        (
            s
            for s in (
                PatchStatus.VIOLATED,
                PatchStatus.UNVERIFIED,
                PatchStatus.ACCEPTED_WITH_EXTERNAL_CHANGES,
            )
            if s in statuses
        ),
        PatchStatus.ACCEPTED,
    )
    reasons = [f"{d}: {v.reason}" for d, v in verdicts.items() if v.reason]
    abuse = []
    for dependent in verdicts:
        item = state.item(dependent, final_phase(state.tree, dependent))  # type: ignore[arg-type]
        stored = project.implementations_dir / dependent / "test_results.json"
        if item.test_results is None or not stored.is_file():
            continue
        flagged = detect_baseline_abuse(
            stored.relative_to(project.root).as_posix(),
            digest_bytes(item.test_results.model_dump_json(indent=2).encode() + b"\n"),
            digest_bytes(stored.read_bytes()),
            [*intent, *external],
        )
        if flagged is not None:
            abuse.append(flagged)
    return RegressionChecked(
        **base,
        status=status,
        reason="; ".join(reasons),
        dependents=sorted(verdicts),
        intent_regressions=intent,
        external_regressions=external,
        gate_worsened=any(v.gate_worsened for v in verdicts.values()),
        baseline_abuse=abuse,
    )


def _named(dependent: str, finding: Finding) -> Finding:
    return finding.model_copy(update={"test_id": f"{dependent}: {finding.test_id}"})


def _failure(
    result: ResultMessage, results: TestResults, status: str, reason: str = ""
) -> ResultMessage:
    """The attempt's failure when its promotion is refused: the regressions (or the
    failing re-verification) become the next attempt's feedback."""
    what = (
        "the promotion would break components already done"
        if status == "violated"
        else "verified again against the current dependencies, the tests fail"
    )
    return result.model_copy(
        update={
            "outcome": "error",
            "error_class": ErrorClass.PERMANENT,
            "error_type": REGRESSION_ERROR,
            "error": f"{status}: {what}" + (f" ({reason})" if reason else ""),
            "test_results": results,
        }
    )
