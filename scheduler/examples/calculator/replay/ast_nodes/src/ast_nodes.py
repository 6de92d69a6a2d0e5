"""Immutable syntax-tree nodes of the calculator language, with printing and analysis."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Union

__all__ = [
    "BINARY_OPERATORS",
    "BinaryOp",
    "Call",
    "Node",
    "Number",
    "UnaryOp",
    "Variable",
    "format_node",
    "free_variables",
]

#: The operator symbols a BinaryOp may carry.
BINARY_OPERATORS = frozenset({"+", "-", "*", "/", "^"})


def _check_name(name: object, what: str) -> None:
    if not isinstance(name, str) or not name.isidentifier() or not name.isascii():
        raise ValueError(f"{what} must be an ASCII identifier, got {name!r}")


def _check_node(value: object, what: str) -> None:
    if not isinstance(value, (Number, Variable, UnaryOp, BinaryOp, Call)):
        raise TypeError(f"{what} must be a Node, got {type(value).__name__}")


@dataclass(frozen=True)
class Number:
    """A numeric literal."""

    value: int | float

    def __post_init__(self) -> None:
        if isinstance(self.value, bool) or not isinstance(self.value, (int, float)):
            raise TypeError(f"Number value must be int or float, got {type(self.value).__name__}")


@dataclass(frozen=True)
class Variable:
    """A reference to a named variable."""

    name: str

    def __post_init__(self) -> None:
        _check_name(self.name, "Variable name")


@dataclass(frozen=True)
class UnaryOp:
    """Prefix negation: ``op`` is always '-'."""

    op: str
    operand: Node

    def __post_init__(self) -> None:
        if self.op != "-":
            raise ValueError(f"unary operator must be '-', got {self.op!r}")
        _check_node(self.operand, "UnaryOp operand")


@dataclass(frozen=True)
class BinaryOp:
    """An infix operation; ``op`` is one of + - * / ^."""

    op: str
    left: Node
    right: Node

    def __post_init__(self) -> None:
        if self.op not in BINARY_OPERATORS:
            raise ValueError(f"binary operator must be one of + - * / ^, got {self.op!r}")
        _check_node(self.left, "BinaryOp left")
        _check_node(self.right, "BinaryOp right")


@dataclass(frozen=True)
class Call:
    """A call of a named function; ``args`` is always stored as a tuple."""

    name: str
    args: tuple[Node, ...] = ()

    def __post_init__(self) -> None:
        _check_name(self.name, "Call name")
        args = tuple(self.args)
        for index, arg in enumerate(args):
            _check_node(arg, f"Call argument {index}")
        object.__setattr__(self, "args", args)


Node = Union[Number, Variable, UnaryOp, BinaryOp, Call]


def format_node(node: Node) -> str:
    """The canonical, fully parenthesised source text of ``node``."""
    if isinstance(node, Number):
        return repr(node.value) if isinstance(node.value, float) else str(node.value)
    if isinstance(node, Variable):
        return node.name
    if isinstance(node, UnaryOp):
        return f"(-{format_node(node.operand)})"
    if isinstance(node, BinaryOp):
        return f"({format_node(node.left)} {node.op} {format_node(node.right)})"
    if isinstance(node, Call):
        return f"{node.name}({', '.join(format_node(a) for a in node.args)})"
    raise TypeError(f"not a Node: {type(node).__name__}")


def free_variables(node: Node) -> frozenset[str]:
    """The names of every Variable in ``node`` (function names of Calls are not included)."""
    if isinstance(node, Number):
        return frozenset()
    if isinstance(node, Variable):
        return frozenset({node.name})
    if isinstance(node, UnaryOp):
        return free_variables(node.operand)
    if isinstance(node, BinaryOp):
        return free_variables(node.left) | free_variables(node.right)
    if isinstance(node, Call):
        names: frozenset[str] = frozenset()
        for arg in node.args:
            names |= free_variables(arg)
        return names
    raise TypeError(f"not a Node: {type(node).__name__}")
