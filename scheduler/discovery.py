"""Dependencies that contracts declare as they are written.

A contract's ``dependencies`` that name tree components become edges of the
work graph (what the component's phases wait for); the rest, and its
``external_dependencies``, are external. A new edge that would close a cycle
rejects the contract at once, before anything else is authored against it.
"""

from __future__ import annotations

from pact_workers.errors import VerificationError
from pact_workers.models.contract import ComponentContract
from pact_workers.models.tree import find_cycle, implementation_edges
from scheduler.state import RunState


def contract_dependencies(
    state: RunState, contract: ComponentContract, component_id: str
) -> tuple[list[str], list[str]]:
    """(new internal dependencies, external dependencies) of ``component_id``'s contract.

    Raises:
        VerificationError: the new internal dependencies close a cycle.
    """
    assert state.tree is not None
    nodes = state.tree.nodes
    cid = component_id
    known = state.dependencies.get(cid, [])
    internal = [d for d in contract.dependencies if d in nodes and d != cid]
    external = [d for d in contract.dependencies if d not in nodes]
    external += list(contract.external_dependencies)
    new = [d for d in dict.fromkeys(internal) if d not in known]
    if new:
        deps = {c: list(v) for c, v in state.dependencies.items()}
        deps[cid] = [*known, *new]
        tree = state.tree.model_copy(
            update={
                "nodes": {
                    c: n.model_copy(update={"dependencies": deps.get(c, [])})
                    for c, n in nodes.items()
                }
            }
        )
        cycle = find_cycle(implementation_edges(tree))
        if cycle:
            raise VerificationError(
                f"component {cid!r}: its contract's dependencies {new} create a cycle: "
                + " -> ".join(cycle)
            )
    return new, list(dict.fromkeys(external))
