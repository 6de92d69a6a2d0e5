"""Risk-scored gates: a variety score per work item and the checks it selects.

Rules, in the order a work item meets them:

- every dispatch of a work item carries four dimensions computed from what the run
  knows (:mod:`scheduler.gates.dimensions`: the contract's size, declared side
  effects and dependents, validation findings, a verified baseline), never typed in;
  ``pact.yaml``'s ``gates:`` may override a dimension per component, and the record
  says so;
- the score is their sum and the gates follow from it alone
  (:mod:`scheduler.gates.scorer`, threshold 7);
- in ``blocking`` mode the work call of a gated item (implement or integrate, score
  >= 7) is preceded by a teachback that the checker (:mod:`scheduler.gates.teachback`)
  must approve; a rejected teachback goes back with its corrections, a bounded number
  of times, then the item fails with the reason; in ``advisory`` mode (the default) no
  teachback is asked and a "would have blocked" event is recorded instead;
- with ``review: gated`` (items whose score reaches 7) or ``all`` (every implement or
  integrate item), a verified item waits in ``awaiting_review`` for a human; only an
  approval promotes it, a rejection sends the note to a new attempt.

Only the events of :mod:`scheduler.gates.events` record what a gate decided; the
state folds them like any other event. This module names only what loads without
the run's events, so that :mod:`scheduler.events` may import from the package.
"""

from __future__ import annotations

from scheduler.gates.scorer import (
    ORCHESTRATE_MIN,
    Gates,
    ScoreError,
    auditor_required_for_score,
    gates_for_score,
    route_workflow,
    score_variety,
    teachback_mode_for_score,
    validate_dimension,
    validate_score,
)

__all__ = [
    "ORCHESTRATE_MIN",
    "Gates",
    "ScoreError",
    "auditor_required_for_score",
    "gates_for_score",
    "route_workflow",
    "score_variety",
    "teachback_mode_for_score",
    "validate_dimension",
    "validate_score",
]
