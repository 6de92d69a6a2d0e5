"""Contract tests for the evaluation facade: re-exports plus default_environment and
evaluate_with."""

import math

import environment
import evaluator
import pytest
from ast_nodes import BinaryOp, Call, Number, Variable
from evaluation import (
    Environment,
    EvaluationError,
    UndefinedNameError,
    default_environment,
    evaluate_node,
    evaluate_with,
)


def test_facade_reexports_the_children_objects_unchanged():
    assert evaluate_node is evaluator.evaluate_node
    assert EvaluationError is evaluator.EvaluationError
    assert Environment is environment.Environment
    assert UndefinedNameError is environment.UndefinedNameError


def test_default_environment_is_the_standard_one():
    env = default_environment()
    assert env.variable_names == frozenset({"pi", "e"})
    assert env.function_names == frozenset({"abs", "min", "max", "sqrt"})


def test_evaluate_with_binds_variables():
    tree = BinaryOp("*", Variable("rate"), BinaryOp("+", Variable("x"), Number(1)))
    assert evaluate_with(tree, {"rate": 2, "x": 4}) == 10


def test_evaluate_with_without_variables_uses_constants():
    assert evaluate_with(BinaryOp("*", Number(2), Variable("pi"))) == 2 * math.pi
    assert evaluate_with(Call("abs", (Number(-3),)), None) == 3


def test_evaluate_with_variables_may_shadow_constants():
    assert evaluate_with(Variable("e"), {"e": 5}) == 5
    assert default_environment().lookup("e") == math.e


def test_evaluate_with_division_semantics():
    assert evaluate_with(BinaryOp("/", Number(9), Number(2))) == 4.5
    exact = evaluate_with(BinaryOp("/", Number(9), Number(3)))
    assert exact == 3 and type(exact) is int


def test_errors_propagate_from_evaluate_with():
    with pytest.raises(UndefinedNameError):
        evaluate_with(Variable("missing"))
    with pytest.raises(EvaluationError):
        evaluate_with(BinaryOp("/", Variable("x"), Number(0)), {"x": 1})
    with pytest.raises(ValueError):
        evaluate_with(Number(1), {"not valid": 1})
