"""What ``pact status`` shows of the gates: how many work calls advisory mode says
blocking would have held (the number a team looks at before it flips the flag), the
scored items by workflow route, and per item its score, dimensions and gates and where
its teachback or review stands."""

from __future__ import annotations

from collections import Counter
from typing import Any

from pact_workers.models.work import ItemStatus
from scheduler.gates.keeper import GATED_PHASES
from scheduler.gates.scorer import Gates
from scheduler.state import ItemState, RunState


def gates_report(state: RunState) -> dict[str, Any]:
    """The gates of a run, for ``pact status --json``: the count of what would have
    blocked, how many scored implement/integrate items each workflow route took, the
    items awaiting review, and each item's gates."""
    items: dict[str, Any] = {}
    # Records are shared values (a few hundred per run): each is shown once, reused.
    shown: dict[int, dict[str, Any]] = {}
    for key, item in state.items.items():
        record = item.gates.record
        if record is None:
            continue
        part = shown.get(id(record))
        if part is None:
            part = shown[id(record)] = {
                "score": record.score,
                "dimensions": record.dimensions.model_dump(),
                "gates": record.gates.model_dump(),
                "mode": record.mode.value,
                "overrides": record.overrides,
                "computed": record.computed.model_dump() if record.computed else None,
            }
        items[key] = {
            **part,
            "state": item.gates.state,
            "teachback_rounds": item.gates.teachback_rounds,
            "would_have_blocked": item.gates.would_have_blocked,
        }
    return {
        "would_have_blocked": _blocked(state),
        "routes": _routes(_gates_of(_scored(state))),
        "awaiting_review": [
            key for key, i in state.items.items() if i.status is ItemStatus.AWAITING_REVIEW
        ],
        "items": items,
    }


def gate_lines(state: RunState) -> list[str]:
    """What ``pact status`` prints of the gates, the totals first, so that the few
    hundred lines it shows of a large run never leave them out:

    - the count of work calls advisory mode says blocking would have held;
    - how many implement/integrate items were scored, by workflow route, and how many
      of them a blocking teachback or an auditor would gate;
    - one line per scored item: first those a gate acted on or would have held (a
      teachback or review, under way or decided, a teachback corrected, advisory
      mode's "would have blocked", a dimension set in pact.yaml), then the rest.
    """
    lines = []
    blocked = _blocked(state)
    if blocked:
        lines.append(
            f"{blocked} work call(s) would have blocked (advisory): with gates: blocking "
            "each would first need an approved teachback"
        )
    scored = _scored(state)
    if not scored:
        return lines
    lines.append(_totals(_gates_of(scored)))
    # A stable sort: those a gate acted on first, each group in the state's order.
    scored.sort(key=lambda pair: not _acting(pair[1]))
    return lines + [_line(key, item) for key, item in scored]


def _blocked(state: RunState) -> int:
    return sum(1 for item in state.items.values() if item.gates.would_have_blocked)


def _routes(scored: list[Gates]) -> dict[str, int]:
    """How many of ``scored`` each workflow route took, by route name."""
    return dict(sorted(Counter(gates.workflow_route for gates in scored).items()))


def _totals(scored: list[Gates]) -> str:
    teachbacks = sum(1 for gates in scored if gates.teachback_mode == "blocking")
    auditors = sum(1 for gates in scored if gates.auditor_required)
    by_route = ", ".join(f"{n} {route}" for route, n in _routes(scored).items())
    return (
        f"{len(scored)} implement/integrate item(s) scored: {by_route}; "
        f"{teachbacks} with a blocking teachback, {auditors} with an auditor"
    )


def _acting(item: ItemState) -> bool:
    gates, record = item.gates, item.gates.record
    return bool(
        gates.state
        or gates.teachback_rounds
        or gates.would_have_blocked
        or (record and record.overrides)
    )


def _scored(state: RunState) -> list[tuple[str, ItemState]]:
    """The implement/integrate items that were scored, in the state's order."""
    return [(key, item) for key, item in state.items.items() if _shown(item)]


def _gates_of(scored: list[tuple[str, ItemState]]) -> list[Gates]:
    return [item.gates.record.gates for _, item in scored if item.gates.record is not None]


def _shown(item: ItemState) -> bool:
    return item.gates.record is not None and item.phase in GATED_PHASES


def _line(key: str, item: ItemState) -> str:
    record = item.gates.record
    assert record is not None
    d = record.dimensions
    gates = record.gates
    text = (
        f"{key}: score {record.score} (novelty {d.novelty}, scope {d.scope}, "
        f"uncertainty {d.uncertainty}, risk {d.risk}) -> {gates.workflow_route}, "
        f"teachback {gates.teachback_mode}"
        + (", auditor required" if gates.auditor_required else "")
    )
    if record.overrides:
        given = ", ".join(f"{k} {v}" for k, v in sorted(record.overrides.items()))
        text += f"; pact.yaml set {given}"
    notes = []
    if item.gates.would_have_blocked:
        notes.append("would have blocked")
    if item.gates.teachback_rounds:
        notes.append(f"{item.gates.teachback_rounds} teachback(s) corrected")
    if item.gates.state:
        notes.append(item.gates.state.replace("_", " "))
    if notes:
        text += "; " + ", ".join(notes)
    return text
