"""Synthetic decomposition trees for scale runs and tests.

``synthetic_tree(n, branching)``: a balanced tree of ``n`` components, each
parent with up to ``branching`` children, and every leaf depending on its
previous sibling (sibling dependencies, the common case in real trees).
``chain_tree(depth)``: a single line of ``depth`` components, each the only
child of the one before: the deepest tree of its size.
``deep_tree(seed)``: one of a seeded family of irregular trees for scheduling
benchmarks: depth 4 to 6, every parent with 2 to 4 children, sibling
dependency chains, and at least 5 independent leaves (see its docstring).

    .venv/bin/python bench/trees.py --components 10000 --branching 10 > tree.json
    .venv/bin/python bench/trees.py --chain 5000 > deep.json
    .venv/bin/python bench/trees.py --deep 7 > deep7.json
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
import sys
from typing import Any

#: ``deep_tree``'s shape: the deepest leaf's depth (edges from the root) is drawn
#: from DEEP_DEPTHS; each parent has 2 to 4 children; a node above the deepest
#: level (and off the spine that guarantees the depth) is a parent with
#: probability DEEP_PARENT_P; growth stops at DEEP_MAX_COMPONENTS; a child
#: depends on its previous sibling with probability DEEP_CHAIN_P; and at least
#: DEEP_MIN_INDEPENDENT_LEAVES leaves neither depend on nor are depended on.
DEEP_DEPTHS = (4, 5, 6)
DEEP_CHILDREN = (2, 4)
DEEP_PARENT_P = 0.4
DEEP_MAX_COMPONENTS = 60
DEEP_CHAIN_P = 0.5
DEEP_MIN_INDEPENDENT_LEAVES = 5


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


def deep_tree(seed: int) -> dict[str, Any]:
    """A seeded, reproducible deep tree in Pact's tree.json shape.

    Built breadth-first from the root ``c0``: the target depth D is drawn from
    :data:`DEEP_DEPTHS`, and one path (each first child) is a spine of parents
    down to depth D, so the deepest leaf is exactly D deep. Every other node
    above depth D becomes a parent with probability :data:`DEEP_PARENT_P`
    while the tree has fewer than :data:`DEEP_MAX_COMPONENTS` components; a
    parent has 2 to 4 children. Then, among each parent's children, leaves
    first and otherwise in order, each child depends on the one before it with
    probability :data:`DEEP_CHAIN_P`, which makes chains of siblings (a chain
    of subtrees where the siblings are parents). Leaves come first so that no
    leaf depends on a parent: a leaf's implementation would then wait for an
    integration, which phase-locked scheduling (every implementation before
    any integration) can never run. Last, while fewer than
    :data:`DEEP_MIN_INDEPENDENT_LEAVES` leaves are independent (no dependency
    either way), an independent leaf is added under a parent drawn at random.

    The same seed gives the same tree on every platform (``random.Random``
    seeded with an int, draws made in a fixed order).
    """
    rng = random.Random(seed)
    depth = rng.choice(DEEP_DEPTHS)
    nodes = {"c0": _node("c0", "")}
    level = {"c0": 0}
    frontier = ["c0"]
    spine = {"c0"}
    while frontier:
        cid = frontier.pop(0)
        on_spine = cid in spine and level[cid] < depth
        grows = level[cid] < depth and len(nodes) < DEEP_MAX_COMPONENTS
        if not (on_spine or (grows and (cid == "c0" or rng.random() < DEEP_PARENT_P))):
            continue
        for i in range(rng.randint(*DEEP_CHILDREN)):
            child = _add_child(nodes, level, cid)
            if on_spine and i == 0:
                spine.add(child)
            frontier.append(child)
    for node in nodes.values():
        leaves_first = sorted(node["children"], key=lambda c: bool(nodes[c]["children"]))
        for before, after in itertools.pairwise(leaves_first):
            if rng.random() < DEEP_CHAIN_P:
                nodes[after]["dependencies"].append(before)
    parents = [cid for cid, node in nodes.items() if node["children"]]
    while len(independent_leaves(nodes)) < DEEP_MIN_INDEPENDENT_LEAVES:
        _add_child(nodes, level, rng.choice(parents))
    for cid, node in nodes.items():
        node["depth"] = level[cid]
    return {"root_id": "c0", "nodes": nodes}


def _add_child(nodes: dict[str, dict[str, Any]], level: dict[str, int], parent: str) -> str:
    cid = f"c{len(nodes)}"
    nodes[cid] = _node(cid, parent)
    nodes[parent]["children"].append(cid)
    level[cid] = level[parent] + 1
    return cid


def independent_leaves(nodes: dict[str, dict[str, Any]]) -> list[str]:
    """Leaves that depend on nothing and that nothing depends on."""
    depended_on = {d for node in nodes.values() for d in node["dependencies"]}
    return [
        cid
        for cid, node in nodes.items()
        if not node["children"] and not node["dependencies"] and cid not in depended_on
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--components", type=int, default=1000)
    parser.add_argument("--branching", type=int, default=10)
    parser.add_argument("--chain", type=int, help="a chain this deep instead")
    parser.add_argument("--deep", type=int, metavar="SEED", help="deep_tree(SEED) instead")
    args = parser.parse_args(argv)
    if args.deep is not None:
        tree = deep_tree(args.deep)
    elif args.chain:
        tree = chain_tree(args.chain)
    else:
        tree = synthetic_tree(args.components, args.branching)
    json.dump(tree, sys.stdout)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
