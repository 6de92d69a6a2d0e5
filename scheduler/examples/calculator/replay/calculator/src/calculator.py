"""The calculator: source text -> tokens (lexing) -> tree (parsing) -> value (evaluation).

Every failure of a well-typed call surfaces as one CalculatorError whose ``stage``
says which step rejected the input.
"""

from __future__ import annotations

from collections.abc import Mapping

from evaluation import (
    ArityError,
    EvaluationError,
    UndefinedNameError,
    default_environment,
    evaluate_with,
)
from lexing import LexError, tokenize
from parsing import Node, ParseError, format_node, free_variables, parse

__all__ = ["STAGES", "CalculatorError", "evaluate", "explain", "required_variables"]

Numeric = int | float

#: The values CalculatorError.stage takes, in pipeline order.
STAGES = ("input", "lex", "parse", "evaluate")


class CalculatorError(ValueError):
    """Any rejection of an expression; ``position`` is a 0-based offset or None."""

    def __init__(self, stage: str, message: str, position: int | None = None) -> None:
        self.stage = stage
        self.message = message
        self.position = position
        where = "" if position is None else f" at position {position}"
        super().__init__(f"{stage} error: {message}{where}")


def _tree(expression: str) -> Node:
    if not isinstance(expression, str):
        raise TypeError(f"expression must be a str, got {type(expression).__name__}")
    try:
        tokens = tokenize(expression)
    except LexError as exc:
        raise CalculatorError("lex", f"unexpected character {exc.character!r}", exc.position) from exc
    try:
        return parse(tokens)
    except ParseError as exc:
        raise CalculatorError("parse", exc.message, exc.position) from exc


def evaluate(expression: str, variables: Mapping[str, Numeric] | None = None) -> Numeric:
    """The value of ``expression`` with ``variables`` bound on top of pi and e."""
    if variables:
        try:
            default_environment().with_variables(variables)
        except (TypeError, ValueError) as exc:
            raise CalculatorError("input", str(exc)) from exc
    tree = _tree(expression)
    try:
        return evaluate_with(tree, variables)
    except (EvaluationError, UndefinedNameError, ArityError) as exc:
        raise CalculatorError("evaluate", str(exc)) from exc


def explain(expression: str) -> str:
    """The canonical, fully parenthesised form of ``expression`` (it is not evaluated)."""
    return format_node(_tree(expression))


def required_variables(expression: str) -> list[str]:
    """Sorted names of the variables ``expression`` uses that the default environment lacks."""
    known = default_environment().variable_names
    return sorted(name for name in free_variables(_tree(expression)) if name not in known)
