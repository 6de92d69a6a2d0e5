"""Synthetic decomposition trees for scale runs and tests.

``synthetic_tree(n, branching)``: a balanced tree of ``n`` components, each
parent with up to ``branching`` children, and every leaf depending on its
previous sibling (sibling dependencies, the common case in real trees).
``chain_tree(depth)``: a single line of ``depth`` components, each the only
child of the one before: the deepest tree of its size.

    .venv/bin/python bench/trees.py --components 10000 --branching 10 > tree.json
    .venv/bin/python bench/trees.py --chain 5000 > deep.json
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from typing import Any


def _node(cid: str, parent: str) -> dict[str, Any]:
    return {
        "component_id": cid,
        "name": cid.replace("_", " ").title(),
        "description": f"synthetic component {cid}",
        "parent_id": parent,
        "children": [],
        "dependencies": [],
    }


def synthetic_tree(components: int, branching: int = 10) -> dict[str, Any]:
    """Pact's tree.json shape: ``components`` nodes, breadth-first, ``branching`` wide."""
    if components < 1 or branching < 1:
        raise ValueError("components and branching must be at least 1")
    nodes = {"c0": _node("c0", "")}
    for i in range(1, components):
        parent = f"c{(i - 1) // branching}"
        cid = f"c{i}"
        nodes[cid] = _node(cid, parent)
        nodes[parent]["children"].append(cid)
    for node in nodes.values():
        leaves = [c for c in node["children"] if not nodes[c]["children"]]
        for before, after in itertools.pairwise(leaves):
            nodes[after]["dependencies"].append(before)
    for cid, node in nodes.items():
        node["depth"] = 0 if cid == "c0" else nodes[node["parent_id"]]["depth"] + 1
    return {"root_id": "c0", "nodes": nodes}


def chain_tree(depth: int) -> dict[str, Any]:
    """``depth`` components, each the only child of the previous one."""
    if depth < 1:
        raise ValueError("depth must be at least 1")
    nodes = {"c0": _node("c0", "")}
    for i in range(1, depth):
        nodes[f"c{i}"] = _node(f"c{i}", f"c{i - 1}")
        nodes[f"c{i - 1}"]["children"].append(f"c{i}")
    return {"root_id": "c0", "nodes": nodes}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--components", type=int, default=1000)
    parser.add_argument("--branching", type=int, default=10)
    parser.add_argument("--chain", type=int, help="a chain this deep instead")
    args = parser.parse_args(argv)
    tree = chain_tree(args.chain) if args.chain else synthetic_tree(args.components, args.branching)
    json.dump(tree, sys.stdout)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
