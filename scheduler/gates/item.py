"""Where one work item stands with its gates (a part of the item's state, folded)."""

from __future__ import annotations

from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field, ValidatorFunctionWrapHandler, field_validator

from scheduler.gates.dimensions import GateRecord
from scheduler.gates.events import AuditRequested, ReviewRequested, Stage

#: The gate states an item goes through (empty: no gate has acted on it).
GateState = Literal[
    "",
    "teachback_pending",
    "under_review",
    "active",
    "correcting",
    "awaiting_review",
    "audit_pending",
    "audited",
    "approved",
    "rejected",
]


#: The state's gate records, one object per distinct value: a record is a frozen value
#: made of a few small numbers, so a run of any size holds a few hundred of them, not
#: one per item. Keyed by their JSON (``_RECORDS``) and by the repr of the document
#: they were read from (``_READ``); both bounded, as overrides and modes vary per run.
_RECORDS: dict[str, GateRecord] = {}
_READ: dict[str, GateRecord | None] = {}
_BOUND = 4096


def interned(gate: GateRecord) -> GateRecord:
    """The one shared record equal to ``gate`` without its reasons (the state keeps the
    numbers; the reasons stay in the log's ``item_dispatched`` event)."""
    stripped = gate.model_copy(update={"reasons": {}}) if gate.reasons else gate
    key = stripped.model_dump_json()
    known = _RECORDS.get(key)
    if known is None:
        if len(_RECORDS) >= _BOUND:
            _RECORDS.clear()
        known = _RECORDS[key] = stripped
    return known


class HasGates(Protocol):
    gates: ItemGates


class ItemGates(BaseModel):
    """The latest gate record, the teachback's progress and any human review."""

    #: The gate record of the latest dispatch (None before the first).
    record: GateRecord | None = None
    #: What the current attempt is for.
    stage: Stage = "work"
    state: GateState = ""
    #: An approved teachback lets the work call go ahead (kept across retries).
    teachback_approved: bool = False
    #: Teachbacks rejected so far (bounded by ``gates.max_teachback_rounds``).
    teachback_rounds: int = 0
    #: The latest teachback's bundle, and whether the auditor reviews it next.
    teachback_output: str = ""
    audit_teachback: bool = False
    #: The corrections of the latest rejected teachback.
    corrections: list[str] = Field(default_factory=list)
    #: Advisory mode recorded that blocking would have held this item.
    would_have_blocked: bool = False
    #: The verified attempt waiting for the auditor, and its last findings.
    audit: AuditRequested | None = None
    audit_findings: list[str] = Field(default_factory=list)
    #: The verified attempt waiting for a human, and the last decision.
    review: ReviewRequested | None = None
    decided_by: str = ""
    note: str = ""

    @field_validator("record", mode="wrap")
    @classmethod
    def _shared_record(cls, value: Any, handler: ValidatorFunctionWrapHandler) -> Any:
        """Records read back (state.json) are interned as the fold interns them."""
        if not isinstance(value, dict):
            return handler(value)
        key = repr(value)
        known = _READ.get(key)
        if known is None:
            known = handler(value)
            if known is not None:
                known = interned(known)
            if len(_READ) >= _BOUND:
                _READ.clear()
            _READ[key] = known
        return known


class _Untouched(ItemGates):
    """The gates of an item no gate has acted on: frozen, so that one instance can be
    shared by every such item (a run of 10,000 components holds 30,000 items and most
    never meet a gate), and hashable by identity, so that a field defaulting to it
    shares it rather than copying it."""

    model_config = ConfigDict(frozen=True)

    __hash__ = object.__hash__


#: The default of ``ItemState.gates``: read it freely, never write to it (it is frozen).
NO_GATES: ItemGates = _Untouched()


def open_gates(item: HasGates) -> ItemGates:
    """``item``'s own gates, to change: the shared :data:`NO_GATES` is replaced by a
    fresh record first (every writer of an item's gates goes through here)."""
    if type(item.gates) is not ItemGates:
        item.gates = ItemGates()
    return item.gates
