"""Evaluation feature: the facade over name resolution (environment) and the evaluator."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from environment import ArityError, Builtin, Environment, UndefinedNameError
from evaluator import MAX_INT_EXPONENT, EvaluationError, evaluate_node

if TYPE_CHECKING:
    from ast_nodes import Node

__all__ = [
    "MAX_INT_EXPONENT",
    "ArityError",
    "Builtin",
    "Environment",
    "EvaluationError",
    "UndefinedNameError",
    "default_environment",
    "evaluate_node",
    "evaluate_with",
]

Numeric = int | float


def default_environment() -> Environment:
    """A fresh Environment.default(): constants pi and e; abs, min, max, sqrt."""
    return Environment.default()


def evaluate_with(node: Node, variables: Mapping[str, Numeric] | None = None) -> Numeric:
    """Evaluate ``node`` in the default environment extended with ``variables``."""
    env = default_environment()
    if variables:
        env = env.with_variables(variables)
    return evaluate_node(node, env)
