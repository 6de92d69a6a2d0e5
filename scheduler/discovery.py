"""Contracts as they are written: validated at once, their dependencies made edges.

Each contract a worker returns is checked (``scheduler.validation``) before the run
accepts it, so before its tests, its implementation or any dependent's contract is
dispatched. Its dependency names are read as the tree's ids (a corrected name is
recorded and the edge uses the real id); names that are no component are external
and must be importable where the contract was verified (the worker's import probe)
or present in the project's source tree.

- Accepted: the new internal dependencies become edges of the work graph (what the
  component's implementation waits for) and the external ones are recorded.
- Rejected by a cycle with the contracts already accepted: final (a void suspension).
- Rejected by any other error: the attempt fails with the findings as its feedback
  and the policy retries it up to ``max_attempts``. Internal dependencies that had no
  contract yet become edges at once, so the next attempt waits for their contracts
  and is shown them.

Every check is logged (:class:`~scheduler.events.ContractChecked`) before the item
is accepted or rejected.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from pact_workers.artifacts import ArtifactStore
from pact_workers.errors import VerificationError
from pact_workers.models.contract import ComponentContract
from pact_workers.models.work import ErrorClass, ItemStatus, Phase, ResultMessage
from pact_workers.probes import importable_from_probe
from pact_workers.runner import REJECTED, TESTS_FAILED
from pact_workers.verify import CONTRACT_FILE, verify_contract
from scheduler.events import ContractChecked
from scheduler.policy import DEPENDENCY_CYCLE
from scheduler.state import RunState
from scheduler.validation import (
    CheckInputs,
    ContractCheck,
    NameIndex,
    QualityMode,
    check_contract,
)

#: Findings listed in a rejected attempt's feedback before the rest are counted.
MAX_FEEDBACK_FINDINGS = 30

_INDEXES: dict[tuple[str, int], NameIndex] = {}


@dataclass(frozen=True)
class ContractVerdict:
    """What the run does with a new contract."""

    check: ContractCheck
    event: ContractChecked
    #: Internal dependencies the tree did not declare: new edges (when accepted).
    discovered: list[str]
    external: list[str]
    #: Why the attempt is rejected (its feedback); empty: accepted.
    error: str = ""

    @property
    def cycle(self) -> bool:
        return bool(self.check.cycle)


def check_new_contract(
    state: RunState,
    store: ArtifactStore,
    contract: ComponentContract,
    *,
    attempt: int,
    importable: Mapping[str, bool] | None,
    source_tree: Path | None,
    quality: QualityMode,
) -> ContractVerdict:
    """Validate a contract a worker returned against the run as it stands."""
    assert state.tree is not None
    cid = contract.component_id
    inputs = CheckInputs(
        names=_names(state),
        existing=AcceptedContracts(state, store),
        tree=state.tree,
        source_tree=source_tree,
        importable=(lambda name: importable.get(name)) if importable is not None else _unknown,
        quality=quality,
        edges=_Edges(state),
    )
    check = check_contract(contract, inputs)
    known = state.dependencies.get(cid, [])
    waits_for: list[str] = []
    if check.errors and not check.cycle:
        waits_for = [
            d
            for d in check.missing_contracts
            if d not in known
            and state.item(d, Phase.CONTRACT).status not in {ItemStatus.FAILED, ItemStatus.POISONED}
        ]
    event = ContractChecked(
        component_id=cid,
        phase=Phase.CONTRACT,
        attempt=attempt,
        digest=check.digest,
        context=check.context,
        accepted=check.accepted,
        findings=list(check.findings),
        corrections=list(check.corrections),
        dependencies=list(check.dependencies),
        waits_for=waits_for,
    )
    return ContractVerdict(
        check=check,
        event=event,
        discovered=[d for d in check.internal if d not in known],
        external=check.external,
        error=rejection(check, waits_for) if check.errors else "",
    )


def judge_contract(
    state: RunState,
    store: ArtifactStore,
    result: ResultMessage,
    *,
    source_tree: Path | None,
    quality: QualityMode,
    imported: bool = False,
) -> tuple[ContractChecked | None, ResultMessage | None, list[str], list[str]]:
    """What the run loop does with a contract result: (the check to log, the failure
    to apply instead of a success or None, new internal and external dependencies).

    A contract that does not parse is rejected (retried with the reason); a cycle is
    final; any other finding rejects the attempt with the findings as feedback, as
    failing tests do. An ``imported`` contract (one a Pact project holds) is the
    interface its code was written against: its findings are logged, and only a cycle
    rejects it.
    """
    try:
        contract = verify_contract(store.get_bundle(result.output or ""), result.component_id)
    except VerificationError as exc:
        return None, _failure(result, REJECTED, str(exc)), [], []
    verdict = check_new_contract(
        state,
        store,
        contract,
        attempt=result.attempt,
        importable=importable_from_probe(contract, result.test_results),
        source_tree=source_tree,
        quality=quality,
    )
    if not verdict.error:
        return verdict.event, None, verdict.discovered, verdict.external
    if imported and not verdict.cycle:
        kept = verdict.event.model_copy(update={"accepted": True, "waits_for": []})
        return kept, None, verdict.discovered, verdict.external
    error_type = DEPENDENCY_CYCLE if verdict.cycle else TESTS_FAILED
    return verdict.event, _failure(result, error_type, verdict.error), [], []


def _failure(result: ResultMessage, error_type: str, error: str) -> ResultMessage:
    return result.model_copy(
        update={
            "outcome": "error",
            "error_class": ErrorClass.PERMANENT,
            "error_type": error_type,
            "error": error,
            "test_results": None,
        }
    )


def rejection(check: ContractCheck, waits_for: Sequence[str]) -> str:
    """The feedback of a rejected contract: every error with its field path."""
    errors = check.errors
    lines = [f"contract rejected by validation ({len(errors)} errors):"]
    lines += [f"- {finding}" for finding in errors[:MAX_FEEDBACK_FINDINGS]]
    if len(errors) > MAX_FEEDBACK_FINDINGS:
        lines.append(f"- ... and {len(errors) - MAX_FEEDBACK_FINDINGS} more")
    if waits_for:
        lines.append(
            f"The next attempt waits for the contracts of {', '.join(waits_for)} and is shown them."
        )
    return "\n".join(lines)


class AcceptedContracts(Mapping[str, ComponentContract]):
    """The run's accepted contracts, read from the store only when asked for."""

    def __init__(self, state: RunState, store: ArtifactStore) -> None:
        self.state = state
        self.store = store
        self._read: dict[str, ComponentContract] = {}

    def _output(self, cid: str) -> str | None:
        if self.state.tree is None or cid not in self.state.tree.nodes:
            return None
        item = self.state.item(cid, Phase.CONTRACT)
        return item.output if item.status is ItemStatus.DONE else None

    def __contains__(self, cid: object) -> bool:
        return isinstance(cid, str) and self._output(cid) is not None

    def __getitem__(self, cid: str) -> ComponentContract:
        if cid not in self._read:
            output = self._output(cid)
            if output is None:
                raise KeyError(cid)
            raw = self.store.get_bundle(output)[CONTRACT_FILE]
            self._read[cid] = ComponentContract.model_validate_json(raw)
        return self._read[cid]

    def __iter__(self) -> Iterator[str]:
        assert self.state.tree is not None
        return (c for c in self.state.tree.nodes if c in self)

    def __len__(self) -> int:
        return sum(1 for _ in self)


class _Edges(Mapping[str, Sequence[str]]):
    """What each component waits for (dependencies and children), as the run knows it."""

    def __init__(self, state: RunState) -> None:
        assert state.tree is not None
        self.state = state
        self.nodes = state.tree.nodes

    def __getitem__(self, cid: str) -> Sequence[str]:
        if cid not in self.nodes:
            raise KeyError(cid)
        deps = [d for d in self.state.dependencies.get(cid, []) if d in self.nodes]
        return list(dict.fromkeys([*deps, *self.nodes[cid].children]))

    def __iter__(self) -> Iterator[str]:
        return iter(self.nodes)

    def __len__(self) -> int:
        return len(self.nodes)


def _names(state: RunState) -> NameIndex:
    """The tree's ids, indexed once per run (a tree never changes during a run)."""
    assert state.tree is not None
    key = (state.run_id, len(state.tree.nodes))
    index = _INDEXES.get(key)
    if index is None:
        if len(_INDEXES) >= 8:
            _INDEXES.clear()
        index = _INDEXES[key] = NameIndex(state.tree.nodes)
    return index


def _unknown(_name: str) -> bool | None:
    return None
