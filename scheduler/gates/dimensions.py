"""The four dimensions of a work item, computed from what the run knows.

Rules (each dimension an int in [1, 4]; see :mod:`scheduler.gates.scorer`):

- scope: the size of the component's contract, counted as functions + error cases +
  internal dependencies: up to 15 is 1, up to 30 is 2, up to 45 is 3, more is 4.
  Before the contract exists (the contract phase) the tree's dependencies and
  children stand in for it;
- risk: 1, plus 1 when a function declares a side effect on state or files it reads,
  plus 2 when one writes files or calls the network, plus 1 from 4 transitive
  dependents on and 2 from 8 on (capped at 4);
- uncertainty: 1 plus the contract-quality and validation findings of the
  component's latest contract check, plus 1 when the run's interview holds answers
  filled in with a confidence below :data:`LOW_CONFIDENCE` (capped at 4);
- novelty: 1 when a verified baseline (``.pact/baselines/<id>.json``) or an earlier
  retrospective (``.pact/retrospectives/*.json``) names the component, else 2.

``pact.yaml`` may override any dimension per component; the computed values are kept
beside the result so that the override stays visible.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from pact_workers.models.contract import ComponentContract, SideEffectKind
from scheduler.gates.scorer import Gates, gates_for_score, score_variety
from scheduler.gates.settings import DimensionOverride, GateMode

#: Transitive dependents counted at most (the risk buckets stop at 8).
DEPENDENTS_CAP = 8
#: An interview answer below this confidence (an assumption matched loosely) makes
#: every component of the run less certain.
LOW_CONFIDENCE = 0.7
_STATEFUL = {SideEffectKind.MUTATES_STATE, SideEffectKind.READS_FILE}
_OUTWARD = {SideEffectKind.WRITES_FILE, SideEffectKind.NETWORK_CALL}


class Dimensions(BaseModel):
    """novelty, scope, uncertainty and risk, each in [1, 4]."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    novelty: int = Field(ge=1, le=4)
    scope: int = Field(ge=1, le=4)
    uncertainty: int = Field(ge=1, le=4)
    risk: int = Field(ge=1, le=4)

    @property
    def score(self) -> int:
        return score_variety(self.novelty, self.scope, self.uncertainty, self.risk)


class GateRecord(BaseModel):
    """What the gates made of one dispatch: recorded on ``item_dispatched``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    dimensions: Dimensions
    score: int
    gates: Gates
    mode: GateMode
    #: What was computed, when ``pact.yaml`` overrode a dimension (else None).
    computed: Dimensions | None = None
    #: The dimensions ``pact.yaml`` set for the component.
    overrides: dict[str, int] = Field(default_factory=dict)
    #: Why each dimension has its value, in words.
    reasons: dict[str, str] = Field(default_factory=dict)


class ComponentFacts(BaseModel):
    """What the dimensions are computed from (gathered by the run loop)."""

    model_config = ConfigDict(frozen=True)

    contract: ComponentContract | None = None
    tree_dependencies: int = 0
    children: int = 0
    dependents: int = 0
    findings: int = 0
    #: Interview answers of the run below :data:`LOW_CONFIDENCE`.
    low_confidence_answers: int = 0
    baseline: bool = False


def _bucket(value: int, bounds: tuple[int, int, int]) -> int:
    return 1 + sum(value > bound for bound in bounds)


def compute_dimensions(facts: ComponentFacts) -> tuple[Dimensions, dict[str, str]]:
    """The dimensions of a component and, per dimension, why (see the module rules)."""
    contract = facts.contract
    reasons: dict[str, str] = {}
    if contract is not None:
        functions = len(contract.functions)
        errors = sum(len(f.error_cases) for f in contract.functions)
        deps = len(contract.dependencies)
        size = functions + errors + deps
        reasons["scope"] = (
            f"contract size {size}: {functions} functions, {errors} error cases, "
            f"{deps} dependencies"
        )
        kinds = {e.kind for f in contract.functions for e in f.declared_effects}
    else:
        size = 5 * (facts.tree_dependencies + facts.children)
        reasons["scope"] = (
            f"no contract yet: {facts.tree_dependencies} dependencies and "
            f"{facts.children} children in the tree"
        )
        kinds = set()
    scope = _bucket(size, (15, 30, 45))
    effect_points = 2 if kinds & _OUTWARD else 1 if kinds & _STATEFUL else 0
    dependent_points = 2 if facts.dependents >= 8 else 1 if facts.dependents >= 4 else 0
    risk = min(4, 1 + effect_points + dependent_points)
    shown = sorted(k.value for k in kinds if k is not SideEffectKind.NONE) or ["none"]
    more = "+" if facts.dependents >= DEPENDENTS_CAP else ""
    reasons["risk"] = (
        f"side effects: {', '.join(shown)}; {facts.dependents}{more} transitive dependents"
    )
    unsure = 1 if facts.low_confidence_answers else 0
    uncertainty = min(4, 1 + facts.findings + unsure)
    reasons["uncertainty"] = f"{facts.findings} contract findings" + (
        f", {facts.low_confidence_answers} low-confidence interview answers" if unsure else ""
    )
    novelty = 1 if facts.baseline else 2
    reasons["novelty"] = (
        "a verified baseline or retrospective exists"
        if facts.baseline
        else "no verified baseline or retrospective"
    )
    dims = Dimensions(novelty=novelty, scope=scope, uncertainty=uncertainty, risk=risk)
    return dims, reasons


def gate_record(
    facts: ComponentFacts, *, mode: GateMode, override: DimensionOverride | None = None
) -> GateRecord:
    """The record of one dispatch: computed dimensions, any override, score and gates."""
    computed, reasons = compute_dimensions(facts)
    given = override.given() if override is not None else {}
    dims = computed.model_copy(update=given) if given else computed
    for name in given:
        reasons[name] = f"set by pact.yaml (computed {getattr(computed, name)})"
    score = dims.score
    gates: Gates = gates_for_score(score)
    return GateRecord(
        dimensions=dims,
        score=score,
        gates=gates,
        mode=mode,
        computed=computed if given else None,
        overrides=given,
        reasons=reasons,
    )
