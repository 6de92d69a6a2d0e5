"""Parsing feature: the facade over the syntax tree (ast_nodes) and the parser (parser)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from ast_nodes import (
    BINARY_OPERATORS,
    BinaryOp,
    Call,
    Node,
    Number,
    UnaryOp,
    Variable,
    format_node,
    free_variables,
)
from parser import ParseError, parse

if TYPE_CHECKING:
    from tokens import Token

__all__ = [
    "BINARY_OPERATORS",
    "BinaryOp",
    "Call",
    "Node",
    "Number",
    "ParseError",
    "UnaryOp",
    "Variable",
    "format_node",
    "free_variables",
    "parse",
    "render",
    "variables_of",
]


def render(tokens: Sequence[Token]) -> str:
    """Parse ``tokens`` and return the canonical fully parenthesised text of the tree."""
    return format_node(parse(tokens))


def variables_of(tokens: Sequence[Token]) -> list[str]:
    """Parse ``tokens`` and return the free variable names of the tree, sorted."""
    return sorted(free_variables(parse(tokens)))
