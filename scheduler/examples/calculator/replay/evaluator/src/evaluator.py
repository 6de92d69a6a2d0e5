"""Evaluates a syntax tree against an Environment."""

from __future__ import annotations

import math

from ast_nodes import BinaryOp, Call, Node, Number, UnaryOp, Variable
from environment import Environment

__all__ = ["MAX_INT_EXPONENT", "EvaluationError", "evaluate_node"]

Numeric = int | float

#: Largest |exponent| allowed when both operands of '^' are ints.
MAX_INT_EXPONENT = 10_000


class EvaluationError(ArithmeticError):
    """An arithmetic failure: division by zero, overflow, a domain error, a huge exponent."""

    def __init__(self, message: str) -> None:
        self.message = message
        super().__init__(message)


def _divide(left: Numeric, right: Numeric) -> Numeric:
    if right == 0:
        raise EvaluationError("division by zero")
    if isinstance(left, int) and isinstance(right, int) and left % right == 0:
        return left // right  # exact: keep the result an int
    return left / right


def _power(left: Numeric, right: Numeric) -> Numeric:
    if isinstance(left, int) and isinstance(right, int) and abs(right) > MAX_INT_EXPONENT:
        raise EvaluationError("exponent too large")
    if left == 0 and right < 0:
        raise EvaluationError("division by zero")
    result = left**right
    if isinstance(result, complex):
        raise EvaluationError("complex result")
    return result


def _apply(op: str, left: Numeric, right: Numeric) -> Numeric:
    if op == "+":
        return left + right
    if op == "-":
        return left - right
    if op == "*":
        return left * right
    if op == "/":
        return _divide(left, right)
    if op == "^":
        return _power(left, right)
    raise EvaluationError(f"unknown operator {op!r}")


def _checked(value: Numeric) -> Numeric:
    if isinstance(value, float) and not math.isfinite(value):
        raise EvaluationError("non-finite result")
    return value


def evaluate_node(node: Node, env: Environment) -> Numeric:
    """The value of ``node``; operands and arguments are evaluated left to right."""
    if isinstance(node, Number):
        return node.value
    if isinstance(node, Variable):
        return env.lookup(node.name)
    if isinstance(node, UnaryOp):
        return -evaluate_node(node.operand, env)
    if isinstance(node, BinaryOp):
        left = evaluate_node(node.left, env)
        right = evaluate_node(node.right, env)
        try:
            return _checked(_apply(node.op, left, right))
        except OverflowError:
            raise EvaluationError("numeric overflow") from None
    if isinstance(node, Call):
        args = [evaluate_node(arg, env) for arg in node.args]
        try:
            return _checked(env.call(node.name, args))
        except (ValueError, ZeroDivisionError) as exc:
            raise EvaluationError(f"{node.name}(): {exc}") from exc
        except OverflowError:
            raise EvaluationError("numeric overflow") from None
    raise TypeError(f"not a Node: {type(node).__name__}")
