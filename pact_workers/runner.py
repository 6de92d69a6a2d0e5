"""The worker runtime: execute one attempt of one work item and report the result.

``execute_task`` is what every executor calls, in-process or in a Celery task:
fetch the inputs from the artifact store, run the agent, verify its output
with the harness, store the output and return one :class:`ResultMessage`.
It never raises: every failure becomes a classified error result, so no
attempt is ever lost.

A task that carries a hit of the action cache (``task.cached``) skips the agent: the
harness verifies the cached result exactly as it would the agent's answer (unless the
run trusts its cache), and when it rejects it (or its files are gone) the attempt goes
on as any other, with the agent.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Mapping

from pact_workers.agents.base import Agent, AgentRequest
from pact_workers.artifacts import ArtifactStore, Bundle
from pact_workers.classify import classify_error
from pact_workers.errors import ArtifactError, PactError, VerificationError
from pact_workers.models.audit import parse_audit
from pact_workers.models.teachback import parse_teachback
from pact_workers.models.testing import TestResults
from pact_workers.models.work import ErrorClass, Phase, ResultMessage, TaskMessage, Usage
from pact_workers.probes import probe_contract_imports, spec_component_ids
from pact_workers.sandbox.base import Sandbox, safe_relpath
from pact_workers.verify import (
    CONTRACT_FILE,
    check_implementation_files,
    run_contract_tests,
    verify_contract,
    verify_test_suite,
)

log = logging.getLogger(__name__)

#: ``error_type`` of a result whose output the harness rejected. The scheduler
#: retries these with feedback, up to the item's attempt budget.
REJECTED = "rejected"
TESTS_FAILED = "tests_failed"
#: ``error_type`` of an attempt whose inputs the artifact store could not give (a blob
#: that expired from the fleet's Redis, or was lost there): a transient error, since
#: the scheduler sends the inputs again with the attempt that follows.
INPUTS_UNAVAILABLE = "inputs_unavailable"


def execute_task(
    task: TaskMessage,
    *,
    agent: Agent,
    sandbox: Sandbox,
    store: ArtifactStore,
    on_progress: Callable[[str], None] | None = None,
) -> ResultMessage:
    """Run the agent for ``task``, verify its output, and describe what happened.

    ``on_progress`` is called with a stage name ("agent", "verify") as the
    attempt moves on; executors turn it into the heartbeat that renews the lease.
    """
    started = time.monotonic()
    usage = Usage()
    model = ""
    progress = on_progress or (lambda _stage: None)

    def result(**fields: object) -> ResultMessage:
        return ResultMessage(
            run_id=task.run_id,
            component_id=task.component_id,
            phase=task.phase,
            attempt=task.attempt,
            usage=usage,
            duration_s=time.monotonic() - started,
            model=model,
            worker=worker_slot(),
            **fields,
        )

    files: Bundle | None = None
    try:
        # Everything the attempt reads, verification's inputs too, in two round trips
        # of a remote store (not two for each bundle).
        try:
            bundles = store.get_bundles([*task.inputs.values(), *task.verify_inputs.values()])
        except ArtifactError as exc:
            return result(
                outcome="error",
                error_class=ErrorClass.TRANSIENT,
                error_type=INPUTS_UNAVAILABLE,
                error=f"the attempt's inputs could not be read: {exc}",
            )
        inputs = {name: bundles[d] for name, d in task.inputs.items()}
        if task.cached is not None:
            served, cached_results = _serve_cached(
                task, sandbox=sandbox, store=store, bundles=bundles, progress=progress
            )
            if served:
                return result(outcome="ok", output=task.cached.output, test_results=cached_results)
        progress("agent")
        output = agent.produce(
            AgentRequest(
                run_id=task.run_id,
                component_id=task.component_id,
                phase=task.phase,
                role=task.role,
                attempt=task.attempt,
                inputs=inputs,
                feedback=tuple(task.feedback),
                previous_outputs=_previous_outputs(task, store),
                teachback=task.stage == "teachback",
            )
        )
        usage, model = output.usage, output.model
        files = {safe_relpath(p): d for p, d in output.files.items()}
        if task.stage != "work":
            # A teachback or an audit: only its shape is checked here; the scheduler
            # reviews it (against the contract) and decides.
            check = parse_teachback if task.stage == "teachback" else parse_audit
            check(files, task.component_id)
            return result(outcome="ok", output=store.put_bundle(files))
        progress("verify")
        test_results = _verify(task, files, sandbox=sandbox, bundles=bundles)
        digest = store.put_bundle(files)
    except _TestsFailed as exc:
        return result(
            outcome="error",
            error_class=ErrorClass.PERMANENT,
            error_type=TESTS_FAILED,
            error=exc.results.summary(),
            test_results=exc.results,
            output=_keep_rejected(files, store),
        )
    except (VerificationError, ArtifactError) as exc:
        return result(
            outcome="error",
            error_class=ErrorClass.PERMANENT,
            error_type=REJECTED,
            error=str(exc),
            output=_keep_rejected(files, store),
        )
    except Exception as exc:  # an attempt must always produce a result
        cls = classify_error(exc, {"component_id": task.component_id, "phase": task.phase.value})
        if not isinstance(exc, PactError):
            log.exception("attempt %s failed unexpectedly", task.idempotency_key)
        message = str(exc) if isinstance(exc, PactError) else f"{type(exc).__name__}: {exc}"
        return result(
            outcome="error", error_class=cls, error_type=type(exc).__name__, error=message
        )
    return result(outcome="ok", output=digest, test_results=test_results)


def worker_slot() -> str:
    """``host/slot`` of the process or thread running this attempt: a pool thread is a
    slot of an in-process executor, a process (a Celery prefork child) a fleet's."""
    thread = threading.current_thread()
    slot = f"pid{os.getpid()}" if thread is threading.main_thread() else thread.name
    return f"{socket.gethostname()}/{slot}"


def _serve_cached(
    task: TaskMessage,
    *,
    sandbox: Sandbox,
    store: ArtifactStore,
    bundles: Mapping[str, Bundle],
    progress: Callable[[str], None],
) -> tuple[bool, TestResults | None]:
    """Check the cached result of ``task`` as the agent's answer would be checked (only
    that its files are there when the run trusts its cache): (True, what the harness
    measured) when it is accepted; (False, None) when it is not, and the agent is asked.

    Raises:
        Whatever the harness raises besides a rejection (an unavailable sandbox...):
        the attempt fails with it, as it would have after an agent call.
    """
    assert task.cached is not None
    try:
        if not task.cached.verify:
            store.get_manifest(task.cached.output)
            return True, None
        files = store.get_bundle(task.cached.output)
        progress("verify")
        return True, _verify(task, files, sandbox=sandbox, bundles=bundles)
    except (_TestsFailed, VerificationError, ArtifactError) as exc:
        log.warning(
            "attempt %s: the harness rejected the cached result %s (%s); asking the agent",
            task.idempotency_key,
            task.cached.output,
            exc,
        )
        return False, None


def _previous_outputs(task: TaskMessage, store: ArtifactStore) -> dict[int, Bundle]:
    """The files the failed attempts in ``task.feedback`` wrote, where still stored."""
    found: dict[int, Bundle] = {}
    for note in task.feedback:
        if note.output is None:
            continue
        try:
            found[note.attempt] = store.get_bundle(note.output)
        except ArtifactError as exc:  # gone, or corrupt: the prompt goes without them
            log.warning(
                "attempt %s's files cannot be read from the store (%s); the next prompt "
                "shows its feedback without them",
                note.attempt,
                exc,
            )
    return found


def _keep_rejected(files: Bundle | None, store: ArtifactStore) -> str | None:
    """Store a rejected attempt's files for the next attempt's prompt (best effort)."""
    if not files:
        return None
    try:
        return store.put_bundle(files)
    except Exception as exc:  # best effort: the store (e.g. Redis) may be gone
        log.warning("could not keep a rejected attempt's files: %s", exc)
        return None


class _TestsFailed(Exception):
    def __init__(self, results: TestResults) -> None:
        super().__init__(results.summary())
        self.results = results


def _verify(
    task: TaskMessage,
    files: Bundle,
    *,
    sandbox: Sandbox,
    bundles: Mapping[str, Bundle],
) -> TestResults | None:
    """The harness's check of ``files``; ``bundles``: every bundle of the attempt's
    inputs and verification inputs, read already (by digest)."""
    cid = task.component_id
    if task.phase is Phase.CONTRACT:
        # The results of a contract are the import probe of its dependency names: the
        # scheduler, which knows the tree, decides which of them must be importable.
        spec = bundles[task.inputs["spec"]] if "spec" in task.inputs else {}
        return probe_contract_imports(
            sandbox,
            verify_contract(files, cid),
            environment=task.environment,
            timeout_s=task.timeout_s,
            known_ids=spec_component_ids(spec),
        )
    if task.phase is Phase.TEST:
        verify_test_suite(files, cid)
        return None
    check_implementation_files(files, cid)
    verify_inputs = {name: bundles[d] for name, d in task.verify_inputs.items()}
    tests = verify_inputs.get("tests", {})
    if not tests:
        raise VerificationError(f"component {cid!r}: no contract tests to verify against")
    implementation = _merge(verify_inputs.get("deps_src", {}), files, cid)
    contract_digest = task.inputs.get("contract")
    contract_files = bundles[contract_digest] if contract_digest else {}
    results, _ = run_contract_tests(
        sandbox,
        implementation=implementation,
        tests=tests,
        environment=task.environment,
        timeout_s=task.timeout_s,
        # The contract's performance budgets become tests of the harness's own.
        contract=verify_contract(contract_files, cid) if CONTRACT_FILE in contract_files else None,
    )
    if not results.all_passed:
        raise _TestsFailed(results)
    return results


def _merge(deps: Mapping[str, bytes], own: Mapping[str, bytes], cid: str) -> Bundle:
    clash = sorted(set(deps) & set(own))
    if clash:
        raise VerificationError(
            f"component {cid!r}: files {clash} are already provided by a dependency"
        )
    return {**deps, **own}
