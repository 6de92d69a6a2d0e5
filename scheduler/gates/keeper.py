"""The gate keeper: the run loop's side of the gates, at dispatch.

Rules:

- every dispatch carries a :class:`~scheduler.gates.dimensions.GateRecord`; the
  facts it is computed from are gathered here (the contract from the artifact store
  once the contract is done, transitive dependents from the work graph, counted up
  to :data:`~scheduler.gates.dimensions.DEPENDENTS_CAP` so that a dispatch never
  walks the whole tree, findings from the latest contract check, a baseline from
  the project's ``.pact``); a component's facts are cached once its contract is known;
- only the work call of an implement or integrate item is gated (:data:`GATED_PHASES`):
  there a contract exists to check a teachback against;
- ``blocking``: an item whose gates say ``blocking`` is dispatched as a teachback
  until one is approved, and an attempt of it that the harness accepted goes to the
  auditor (its next dispatch, role ``auditor``) when its gates require one;
  ``advisory``: it is dispatched as work, after one ``gate_would_have_blocked``
  event, and no auditor is asked.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

from pydantic import ValidationError

from pact_workers.artifacts import ArtifactStore
from pact_workers.errors import PactError
from pact_workers.models.contract import ComponentContract
from pact_workers.models.work import ItemStatus, Phase
from scheduler.gates.dimensions import (
    DEPENDENTS_CAP,
    LOW_CONFIDENCE,
    ComponentFacts,
    GateRecord,
    gate_record,
)
from scheduler.gates.events import GateWouldHaveBlocked, Stage
from scheduler.gates.settings import GateMode, GatesSettings
from scheduler.state import RunState

log = logging.getLogger(__name__)

#: The phases whose work call a teachback must precede.
GATED_PHASES = frozenset({Phase.IMPLEMENT, Phase.INTEGRATE})
_FINAL = GATED_PHASES
#: Largest retrospective read when looking for a component's name (bytes).
MAX_RETROSPECTIVE_BYTES = 4 * 1024 * 1024
#: How many components' facts the keeper holds at once (oldest dropped first).
_FACTS_KEPT = 1024

Key = tuple[str, Phase]


class GateKeeper:
    """Computes each dispatch's gate record and what the dispatch is for."""

    def __init__(self, settings: GatesSettings, *, pact_dir: Path, store: ArtifactStore) -> None:
        self.settings = settings
        self.pact_dir = pact_dir
        self.store = store
        self._facts: dict[str, ComponentFacts] = {}
        self._retrospectives: str | None = None

    def record(
        self, state: RunState, dependents: dict[Key, list[Key]], component_id: str
    ) -> GateRecord:
        """The gate record of a dispatch of ``component_id`` now."""
        facts = self._facts.get(component_id)
        if facts is None:
            facts = self._gather(state, dependents, component_id)
            if facts.contract is not None:
                # A component's facts serve its few dispatches (test, then implement or
                # integrate, and their retries), close together: keep the recent ones
                # only, so a large tree's contracts are not all held at once.
                if len(self._facts) >= _FACTS_KEPT:
                    del self._facts[next(iter(self._facts))]
                self._facts[component_id] = facts
        return gate_record(
            facts,
            mode=self.settings.mode,
            override=self.settings.components.get(component_id),
        )

    def stage(self, state: RunState, component_id: str, phase: Phase, record: GateRecord) -> Stage:
        """``audit`` while a verified attempt waits for the auditor; ``teachback`` while
        a blocking gate waits for an approved teachback; else ``work``."""
        item = state.item(component_id, phase)
        if item.gates.audit is not None or item.gates.audit_teachback:
            return "audit"
        if (
            self.settings.mode is GateMode.BLOCKING
            and phase in GATED_PHASES
            and record.gates.teachback_mode == "blocking"
            and not item.gates.teachback_approved
        ):
            return "teachback"
        return "work"

    def audits(self, phase: Phase, record: GateRecord | None) -> bool:
        """Whether a verified attempt goes to the auditor before promotion."""
        return (
            self.settings.mode is GateMode.BLOCKING
            and phase in GATED_PHASES
            and record is not None
            and record.gates.auditor_required
        )

    def would_have_blocked(
        self, state: RunState, component_id: str, phase: Phase, record: GateRecord
    ) -> GateWouldHaveBlocked | None:
        """Advisory mode's record of what blocking would hold (once per item)."""
        item = state.item(component_id, phase)
        if (
            self.settings.mode is not GateMode.ADVISORY
            or phase not in GATED_PHASES
            or record.gates.teachback_mode != "blocking"
            or item.gates.would_have_blocked
        ):
            return None
        contract = self._facts.get(component_id, ComponentFacts()).contract
        covered = ""
        if contract is not None:
            errors = sum(len(f.error_cases) for f in contract.functions)
            covered = f" naming its {len(contract.functions)} functions and {errors} error cases"
        d = record.dimensions
        return GateWouldHaveBlocked(
            component_id=component_id,
            phase=phase,
            attempt=item.attempt + 1,
            score=record.score,
            reason=(
                f"variety score {record.score} >= 7 (novelty {d.novelty}, scope {d.scope}, "
                f"uncertainty {d.uncertainty}, risk {d.risk}): gates: blocking would hold "
                f"the work call until a teachback{covered} is approved, and have the "
                "auditor review the verified attempt before its promotion"
            ),
        )

    # -- facts ------------------------------------------------------------------

    def _gather(
        self, state: RunState, dependents: dict[Key, list[Key]], component_id: str
    ) -> ComponentFacts:
        assert state.tree is not None
        node = state.tree.nodes[component_id]
        check = state.validation.get(component_id)
        return ComponentFacts(
            contract=self._contract(state, component_id),
            tree_dependencies=len(state.dependencies.get(component_id, [])),
            children=len(node.children),
            dependents=_count_dependents(dependents, component_id),
            findings=len(check.findings) if check is not None else 0,
            low_confidence_answers=sum(
                1 for a in state.interview_answers if a.confidence < LOW_CONFIDENCE
            ),
            baseline=self._baseline(component_id),
        )

    def _contract(self, state: RunState, component_id: str) -> ComponentContract | None:
        item = state.item(component_id, Phase.CONTRACT)
        if item.status is not ItemStatus.DONE or not item.output:
            return None
        try:
            files = self.store.get_bundle(item.output)
            return ComponentContract.model_validate_json(files["interface.json"])
        except (PactError, KeyError, ValidationError) as exc:
            # The contract was validated when it was accepted; a store that lost it
            # scores the item as if it had none rather than stopping the run.
            log.warning("gates: the contract of %s cannot be read: %s", component_id, exc)
            return None

    def _baseline(self, component_id: str) -> bool:
        if (self.pact_dir / "baselines" / f"{component_id}.json").is_file():
            return True
        if self._retrospectives is None:
            self._retrospectives = _read_retrospectives(self.pact_dir / "retrospectives")
        return json.dumps(component_id) in self._retrospectives


def _count_dependents(dependents: dict[Key, list[Key]], component_id: str) -> int:
    """Components whose finished work waits, directly or not, on this component's
    finished work; counting stops at the cap."""
    starts = [(component_id, phase) for phase in _FINAL if (component_id, phase) in dependents]
    seen: set[str] = set()
    todo = list(starts)
    visited = set(starts)
    while todo and len(seen) < DEPENDENTS_CAP:
        key = todo.pop()
        for nxt in dependents.get(key, ()):
            if nxt[1] not in _FINAL or nxt in visited:
                continue
            visited.add(nxt)
            if nxt[0] != component_id:
                seen.add(nxt[0])
            todo.append(nxt)
    return min(len(seen), DEPENDENTS_CAP)


def _read_retrospectives(directory: Path) -> str:
    """The text of the earlier runs' retrospectives (empty when there are none)."""
    if not directory.is_dir():
        return ""
    texts: list[str] = []
    for path in sorted(directory.glob("*.json")):
        try:
            if path.stat().st_size <= MAX_RETROSPECTIVE_BYTES:
                texts.append(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError) as exc:
            log.warning("gates: %s cannot be read: %s", path, exc)
    return "\n".join(texts)
