"""Applying results: what a worker's result does to a run (the run loop's second half).

A result for another run or an attempt that is no longer current is dropped (and
the drop logged). A success of a contract is judged first (validation, the action
cache's checks); an accepted success is logged, then promoted into the project once
it is on disk; a failure goes to the failure policy, whose decision is logged and
carried out: a retry, a pause, or giving up, which poisons every item downstream.
"""

from __future__ import annotations

from pact_workers.models.work import (
    IN_FLIGHT,
    ErrorClass,
    Phase,
    ResultMessage,
)
from scheduler.discovery import judge_contract
from scheduler.events import (
    ArtifactsPromoted,
    CachedResult,
    CacheDropped,
    CacheHit,
    ItemFailed,
    ItemSucceeded,
    ResultDropped,
    RunPaused,
)
from scheduler.git_promotion import commit_item
from scheduler.pactimport.runcache import is_imported
from scheduler.policy import decide
from scheduler.provenance.promotion import record_promotion
from scheduler.regression.promotion import check_promotion
from scheduler.runpart import RunPart
from scheduler.state import RunStatus, final_phase, item_key
from scheduler.verdicts import poison, systemic_pause

#: The phases whose promotion another component's implementation imports.
_FINAL_PHASES = frozenset({Phase.IMPLEMENT, Phase.INTEGRATE})
#: ``error_type`` of a success whose output the scheduler cannot read.
OUTPUT_LOST = "output_lost"


def output_lost(result: ResultMessage, lost: list[str]) -> ResultMessage:
    """A success whose output is gone from the artifact store before the scheduler read
    it (expired from the fleet's Redis while no scheduler drove the run, or lost
    there), as the transient failure it is: the item runs again."""
    return result.model_copy(
        update={
            "outcome": "error",
            "error_class": ErrorClass.TRANSIENT,
            "error_type": OUTPUT_LOST,
            "error": (
                f"the output {result.output} of this attempt cannot be read from the "
                f"artifact store ({len(lost)} blob(s) gone, e.g. {lost[0]}); running it again"
            ),
            "output": None,
            "test_results": None,
        }
    )


class ResultHandling(RunPart):
    """The part of :class:`~scheduler.run.RunController` that applies results."""

    # -- results ----------------------------------------------------------

    def handle(self, result: ResultMessage) -> None:
        """Apply one result (or log why it is dropped), then acknowledge it."""
        self._apply_result(result)
        self._after_commit(lambda: self.executor.ack(result))

    def _apply_result(self, result: ResultMessage) -> None:
        key = item_key(result.component_id, result.phase)
        item = self.state.items.get(key)
        if result.run_id != self.state.run_id or item is None:
            self._log(
                ResultDropped.from_result(result, "result for another run or an unknown item")
            )
            return
        if item.status not in IN_FLIGHT or item.attempt != result.attempt:
            self._log(
                ResultDropped.from_result(
                    result,
                    f"attempt {result.attempt} is not the current attempt "
                    f"({item.attempt}, {item.status.value})",
                )
            )
            return
        self.leases.release((result.component_id, result.phase, result.attempt))
        if result.outcome == "ok" and result.output is not None:
            lost = self.store.lost(result.output)
            if lost:
                result = output_lost(result, lost)
        if self._gate_result(result):
            return  # a teachback (scheduler.gates), not the item's work
        if result.outcome == "ok" and result.output is not None:
            self._succeed(result)
        else:
            self._fail(result)

    def _succeed(self, result: ResultMessage) -> None:
        item = self.state.item(result.component_id, result.phase)
        key, hit = item.action_key, item.cached
        served = hit is not None and result.output == hit.output
        if hit is not None and not served:
            # The worker's harness rejected the cached result (or could not read it)
            # and the worker asked the agent: this is the agent's answer.
            reason = "the worker's harness rejected the cached result; the agent answered"
            self._log(CacheDropped.from_result(result, key, hit, reason, redispatch=False))
        if hit is not None and served and hit.trusted:
            result = result.model_copy(update={"test_results": hit.test_results})
        measured = result.test_results
        discovered: list[str] = []
        external: list[str] = []
        if result.phase is Phase.CONTRACT:
            checked = self._check_contract(result, cached=hit if served else None)
            if checked is None:
                return
            discovered, external = checked
            # A contract's test results are the harness's import probe, read above.
            result = result.model_copy(update={"test_results": None})
        if hit is not None and served:
            self._log(CacheHit.from_result(result, key, hit))
            # A hit took no agent's time: it must not teach the priorities a phase's length.
            result = result.model_copy(update={"duration_s": 0.0})
        if not self._check_regressions(result):
            return  # refused before promotion (scheduler.regression): the attempt failed
        files = sorted(self.store.get_manifest(result.output or ""))
        if self._hold_for_audit(result, files=files, discovered=discovered, external=external):
            return  # the auditor reviews it before promotion (scheduler.gates)
        if self._hold_for_review(result, files=files, discovered=discovered, external=external):
            return  # verified, but promoted only once a human approves (scheduler.gates)
        self._log(
            ItemSucceeded.from_result(result, files=files, discovered=discovered, external=external)
        )
        # Promotion writes into the project: only once the success is on disk.
        self._after_commit(lambda: self._promote(result.component_id, result.phase))
        if self.cache is not None and key and not served:
            # Only a result the harness accepted, once its success is on disk.
            cache = self.cache
            entry = cache.entry(self.state, result, key=key, files=files, test_results=measured)
            self._after_commit(lambda: cache.record(entry, self.store))

    def _check_regressions(self, result: ResultMessage) -> bool:
        """An expired verification is run again, and done dependents' tests too
        (:mod:`scheduler.regression.promotion`); False: refused, the attempt failed."""
        check = check_promotion(
            self.state,
            self.store,
            self.project,
            result,
            environment=self.settings.environment,
            timeout_s=self.settings.verify_timeout_s,
            users=self._users,
        )
        for event in check.events if check is not None else []:
            self._log(event)
        if check is not None and check.failure is not None:
            self._fail(check.failure)
            return False
        return True

    def _users(self, component_id: str) -> list[str]:
        """Components whose implementation or integration waits for ``component_id``'s
        (the work graph's dependents, contract-declared edges included)."""
        assert self.scheduler is not None
        graph = self.scheduler.graph
        final = (component_id, final_phase(graph.tree, component_id))
        return [c for c, phase in graph.dependents.get(final, ()) if phase in _FINAL_PHASES]

    def _check_contract(
        self, result: ResultMessage, *, cached: CachedResult | None = None
    ) -> tuple[list[str], list[str]] | None:
        """Validate a new contract; (new internal, external dependencies) when it is
        accepted, None when it is not: an agent's attempt then fails (with the findings
        as feedback); a ``cached`` contract is checked against this run like any other,
        and one it rejects is dropped and the agent asked (no attempt of its is spent)."""
        event, failure, discovered, external = judge_contract(
            self.state,
            self.store,
            result,
            source_tree=self.project.root,
            quality=self.settings.contract_quality,
            # A Pact project's contract is kept with its findings (pactimport).
            imported=is_imported(cached),
        )
        if event is not None:
            self._log(event)
        if failure is not None:
            if cached is not None:
                key = self.state.item(result.component_id, result.phase).action_key
                self._log(
                    CacheDropped.from_result(result, key, cached, failure.error, redispatch=True)
                )
            else:
                self._fail(failure)
            return None
        return discovered, external

    def _fail(self, result: ResultMessage) -> None:
        item = self.state.item(result.component_id, result.phase)
        decision = decide(result, item, self.settings, now=self.clock(), rng=self.rng)
        self._log(
            ItemFailed.from_result(
                result,
                decision=decision.action,
                retry_at=decision.retry_at,
                suspension=decision.suspension,
            )
        )
        if decision.action == "give_up":
            self._poison(result.component_id, result.phase)
        elif decision.action == "pause" and self.state.status is RunStatus.ACTIVE:
            # Already paused: the first reason (often a systemic one) stays the reason.
            self._log(
                RunPaused(
                    reason=f"{result.component_id}/{result.phase.value}: {decision.reason}",
                    recommendation=decision.recommendation
                    or "fix the worker environment (see the error), then `pact resume`",
                )
            )

    def _detect_systemic(self) -> None:
        """Pause when ``systemic_threshold`` components of a phase fail the same way."""
        pause = systemic_pause(self.state, self.settings.systemic_threshold)
        if pause is not None:
            self._log(pause)

    def _poison(self, component_id: str, phase: Phase) -> None:
        assert self.scheduler is not None
        event = poison(self.state, self.scheduler.graph, (component_id, phase))
        if event is not None:
            self._log(event)

    def _promote(self, component_id: str, phase: Phase) -> None:
        item = self.state.item(component_id, phase)
        assert item.output is not None
        files = self.store.get_bundle(item.output)
        paths = self.project.promote(component_id, phase, files, item.test_results)
        self._log(ArtifactsPromoted(component_id=component_id, phase=phase, paths=paths))
        # Provenance: the item's .meta.json sidecar, and the component's baseline once
        # its implementation is verified.
        record_promotion(self.project, self.state, component_id, phase)
        if self.settings.promote == "git":
            commit_item(self.project, self.state, self.settings, component_id, phase, paths)
