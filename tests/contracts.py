"""Small contracts and trees for the validation tests."""

from __future__ import annotations

from typing import Any

from pact_workers.models.contract import ComponentContract
from pact_workers.models.tree import DecompositionTree, tree_from_data

PURE = [{"kind": "none"}]


def function(name: str = "run", **fields: Any) -> dict[str, Any]:
    """A function that is clean by every rule unless ``fields`` say otherwise."""
    doc: dict[str, Any] = {
        "name": name,
        "description": f"{name}: returns len(text); raises ValueError when text is empty",
        "inputs": [{"name": "text", "type_ref": "str"}],
        "output_type": "int",
        "side_effects": PURE,
    }
    doc.update(fields)
    return doc


def contract(
    cid: str,
    *,
    dependencies: list[str] | None = None,
    external: list[str] | None = None,
    functions: list[dict[str, Any]] | None = None,
    types: list[dict[str, Any]] | None = None,
    **fields: Any,
) -> ComponentContract:
    doc: dict[str, Any] = {
        "component_id": cid,
        "name": cid,
        "description": f"the {cid} component: counts characters of text",
        "dependencies": dependencies or [],
        "external_dependencies": external or [],
        "functions": functions if functions is not None else [function()],
        "types": types or [],
    }
    doc.update(fields)
    return ComponentContract.model_validate(doc)


def tree(
    parents: dict[str, str | None], dependencies: dict[str, list[str]] | None = None
) -> DecompositionTree:
    """A tree from child -> parent (None for the root)."""
    deps = dependencies or {}
    nodes: dict[str, Any] = {}
    for cid, parent in parents.items():
        nodes[cid] = {
            "component_id": cid,
            "name": cid,
            "parent_id": parent,
            "children": [c for c, p in parents.items() if p == cid],
            "dependencies": deps.get(cid, []),
        }
    root = next(c for c, p in parents.items() if p is None)
    return tree_from_data({"root_id": root, "nodes": nodes}, "<test>")
