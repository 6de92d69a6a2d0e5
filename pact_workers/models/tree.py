"""Decomposition trees: Pact's ``decomposition/tree.json`` and the same fields in YAML.

:func:`load_tree` is the edge: it turns any file a user hands us into a
validated :class:`DecompositionTree`, or raises one :class:`TreeError` whose
message names the file, the component and every problem found.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from pact_workers.errors import CycleError, TreeError
from pact_workers.models.contract import ComponentContract
from pact_workers.models.documents import given, parse_tree_text, read_input_file
from pact_workers.models.names import component_id_problem
from pact_workers.models.testing import TestResults


class DecompositionNode(BaseModel):
    """One component of a decomposition tree (Pact's node, plus ``dependencies``)."""

    model_config = ConfigDict(extra="allow", frozen=True)

    component_id: str
    name: str
    description: str = ""
    depth: int = 0
    parent_id: str = ""
    children: list[str] = Field(default_factory=list)
    dependencies: list[str] = Field(default_factory=list)
    contract: ComponentContract | None = None
    implementation_status: Literal["pending", "contracted", "implemented", "tested", "failed"] = (
        "pending"
    )
    test_results: TestResults | None = None

    @field_validator("parent_id", mode="before")
    @classmethod
    def _null_parent_is_root(cls, value: Any) -> Any:
        return "" if value is None else value

    @property
    def is_leaf(self) -> bool:
        return not self.children


class DecompositionTree(BaseModel):
    """A whole decomposition: ``root_id`` and every node indexed by its id."""

    model_config = ConfigDict(extra="allow", frozen=True)

    root_id: str
    nodes: dict[str, DecompositionNode]

    def leaves(self) -> list[DecompositionNode]:
        return [n for n in self.nodes.values() if n.is_leaf]

    def children_of(self, component_id: str) -> list[str]:
        return list(self.nodes[component_id].children)

    def internal_dependencies(self, component_id: str) -> list[str]:
        """Declared dependencies that are nodes of this tree (the others are external)."""
        return [d for d in self.nodes[component_id].dependencies if d in self.nodes]

    def with_dependencies(self, extra: Mapping[str, Iterable[str]]) -> DecompositionTree:
        """A copy with more dependencies per component (e.g. those contracts declare)."""
        nodes = {}
        for cid, node in self.nodes.items():
            deps = list(dict.fromkeys([*node.dependencies, *extra.get(cid, ())]))
            nodes[cid] = node.model_copy(update={"dependencies": deps})
        tree = self.model_copy(update={"nodes": nodes})
        check_tree(tree, "<dependencies>")
        return tree

    def topological_order(self) -> list[str]:
        """Component ids with every dependency and child before its dependents.

        Depth-first from the ids in sorted order, iteratively (a chain of thousands of
        components must not exhaust Python's recursion limit) and in linear time.
        """
        edges = implementation_edges(self)
        order: list[str] = []
        seen: set[str] = set()
        for start in sorted(self.nodes):
            if start in seen:
                continue
            seen.add(start)
            stack = [(start, iter(edges[start]))]
            while stack:
                cid, pending = stack[-1]
                nxt = next(pending, None)
                if nxt is None:
                    stack.pop()
                    order.append(cid)
                elif nxt not in seen:
                    seen.add(nxt)
                    stack.append((nxt, iter(edges[nxt])))
        return order


def implementation_edges(tree: DecompositionTree) -> dict[str, list[str]]:
    """What each component's implementation waits for: internal dependencies and children."""
    nodes = tree.nodes
    return {
        cid: list(dict.fromkeys([*(d for d in node.dependencies if d in nodes), *node.children]))
        for cid, node in nodes.items()
    }


def find_cycle(edges: Mapping[str, Iterable[str]]) -> list[str] | None:
    """Return one cycle as ``[a, b, ..., a]``, or None when the graph is acyclic."""
    white, grey, black = 0, 1, 2
    colour = {n: white for n in edges}
    for start in sorted(edges):
        if colour[start] != white:
            continue
        stack: list[tuple[str, Iterable[str]]] = [(start, iter(sorted(edges[start])))]
        path = [start]
        colour[start] = grey
        while stack:
            node, it = stack[-1]
            nxt = next(iter(it), None)
            if nxt is None:
                colour[node] = black
                stack.pop()
                path.pop()
                continue
            if nxt not in colour:
                continue
            if colour[nxt] == grey:
                return [*path[path.index(nxt) :], nxt]
            if colour[nxt] == white:
                colour[nxt] = grey
                stack.append((nxt, iter(sorted(edges[nxt]))))
                path.append(nxt)
    return None


#: Largest tree file read: a 10,000-component tree is about 2.5 MB.
MAX_TREE_BYTES = 256 * 1024 * 1024


def load_tree(path: Path | str) -> DecompositionTree:
    """Read and validate a tree file (``.json``, ``.yaml`` or ``.yml``).

    Raises:
        TreeError: naming the file, the component and the problem.
    """
    path = Path(path)
    where = str(path)
    try:
        raw = read_input_file(path, MAX_TREE_BYTES)
    except FileNotFoundError as exc:
        raise TreeError(f"{where}: no such file; check the path to the tree") from exc
    except IsADirectoryError as exc:
        raise TreeError(f"{where}: is a directory, expected a tree file") from exc
    except OSError as exc:
        raise TreeError(f"{where}: cannot be read ({exc.strerror or exc})") from exc
    try:
        text = raw.decode("utf-8-sig")  # a byte-order mark, as some editors write, is no text
    except UnicodeDecodeError as exc:
        raise TreeError(
            f"{where}: not UTF-8 text (invalid byte 0x{raw[exc.start]:02x} at offset "
            f"{exc.start}); save the tree as UTF-8"
        ) from exc
    data = parse_tree_text(text, where, yaml_format=path.suffix.lower() in {".yaml", ".yml"})
    return tree_from_data(data, where)


def tree_from_data(data: Any, where: str) -> DecompositionTree:
    """Validate parsed data as a tree; see :func:`load_tree`."""
    if not isinstance(data, dict):
        raise TreeError(
            f"{where}: expected a mapping with root_id and nodes, got {type(data).__name__}"
        )
    nodes = data.get("nodes")
    if isinstance(nodes, list):
        data = {**data, "nodes": _nodes_from_list(nodes, where)}
        nodes = data["nodes"]
    if nodes is None or (isinstance(nodes, dict) and not nodes):
        raise TreeError(f"{where}: the tree has no nodes; add at least the root component")
    if isinstance(nodes, dict):
        problems = [
            f"nodes.{key}: key does not match its component_id {node.get('component_id')!r}"
            for key, node in nodes.items()
            if isinstance(node, dict) and "component_id" in node and node["component_id"] != key
        ]
        if problems:
            raise TreeError(f"{where}: " + "; ".join(problems))
    try:
        tree = DecompositionTree.model_validate(data)
    except ValidationError as exc:
        raise TreeError(f"{where}: " + "; ".join(_describe(e) for e in exc.errors())) from exc
    check_tree(tree, where)
    return tree


def check_tree(tree: DecompositionTree, where: str) -> None:
    """Structural checks pydantic cannot do; raises one TreeError listing every problem."""
    problems: list[str] = []
    ids = tree.nodes
    for cid in ids:
        problem = component_id_problem(cid)
        if problem is not None:
            problems.append(f"component {_short(cid)!r}: {problem}")
    if tree.root_id not in ids:
        problems.append(f"root_id {tree.root_id!r} is not one of the nodes")
    elif ids[tree.root_id].parent_id:
        problems.append(f"component {tree.root_id!r}: the root must have no parent_id")
    for cid, node in ids.items():
        if node.parent_id and node.parent_id not in ids:
            problems.append(f"component {cid!r}: unknown parent {node.parent_id!r}")
        elif node.parent_id and cid not in ids[node.parent_id].children:
            problems.append(
                f"component {cid!r}: parent_id is {node.parent_id!r} but {node.parent_id!r} "
                "does not list it in children"
            )
        elif not node.parent_id and cid != tree.root_id:
            problems.append(f"component {cid!r}: no parent_id, but it is not the root")
        if len(set(node.children)) != len(node.children):
            problems.append(f"component {cid!r}: a child is listed twice")
        for child in node.children:
            if child not in ids:
                problems.append(f"component {cid!r}: unknown child {child!r}")
            elif ids[child].parent_id != cid:
                problems.append(
                    f"component {cid!r}: lists child {child!r}, whose parent_id is "
                    f"{ids[child].parent_id!r}"
                )
        for dep in node.dependencies:
            if dep == cid:
                problems.append(f"component {cid!r}: depends on itself")
            elif dep not in ids:
                problems.append(
                    f"component {cid!r}: unknown dependency {dep!r}; a module outside the "
                    "tree belongs in the contract's external_dependencies"
                )
    if problems:
        raise TreeError(f"{where}: " + "; ".join(problems))
    hierarchy = {cid: node.children for cid, node in ids.items()}
    cycle = find_cycle(hierarchy)
    if cycle:
        raise CycleError(f"{where}: cycle in parent/children: {' -> '.join(cycle)}", cycle)
    unreachable = sorted(set(ids) - _reachable(tree.root_id, hierarchy))
    if unreachable:
        raise TreeError(
            f"{where}: components not reachable from root {tree.root_id!r}: "
            + ", ".join(unreachable)
        )
    deps = {cid: tree.internal_dependencies(cid) for cid in ids}
    cycle = find_cycle(deps)
    if cycle:
        raise CycleError(f"{where}: dependency cycle: {' -> '.join(cycle)}", cycle)
    cycle = find_cycle(implementation_edges(tree))
    if cycle:
        raise CycleError(
            f"{where}: dependency cycle through the hierarchy (a parent integrates only after "
            f"its children): {' -> '.join(cycle)}",
            cycle,
        )


def _short(cid: str, limit: int = 60) -> str:
    """An id as an error message shows it: very long ones are cut."""
    return cid if len(cid) <= limit else f"{cid[:limit]}...({len(cid)} characters)"


def _reachable(root: str, edges: Mapping[str, Iterable[str]]) -> set[str]:
    seen, todo = {root}, [root]
    while todo:
        for nxt in edges.get(todo.pop(), ()):
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen


def _nodes_from_list(nodes: list[Any], where: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for i, node in enumerate(nodes):
        if not isinstance(node, dict) or not isinstance(node.get("component_id"), str):
            raise TreeError(f"{where}: nodes[{i}]: expected a mapping with a component_id")
        cid = node["component_id"]
        if cid in out:
            raise TreeError(f"{where}: nodes[{i}]: duplicate component id {cid!r}")
        out[cid] = node
    return out


def _describe(error: Any) -> str:
    loc = list(error["loc"])
    if len(loc) >= 2 and loc[0] == "nodes":
        place = f"component {loc[1]!r}" + (
            f" field {'.'.join(str(p) for p in loc[2:])}" if loc[2:] else ""
        )
    else:
        place = "field " + ".".join(str(p) for p in loc) if loc else "tree"
    return f"{place}: {error['msg']}{given(error)}"
