"""Contract tests for evaluator.evaluate_node and evaluator.EvaluationError."""

import math

import pytest
from ast_nodes import BinaryOp, Call, Number, UnaryOp, Variable
from environment import ArityError, Environment, UndefinedNameError
from evaluator import MAX_INT_EXPONENT, EvaluationError, evaluate_node

ENV = Environment.default().with_variables({"x": 10, "half": 0.5})


def ev(node, env=ENV):
    return evaluate_node(node, env)


def op(symbol, left, right):
    as_node = lambda v: Number(v) if isinstance(v, (int, float)) else v  # noqa: E731
    return BinaryOp(symbol, as_node(left), as_node(right))


def test_literals_and_variables():
    assert ev(Number(7)) == 7
    assert ev(Variable("x")) == 10
    assert ev(Variable("pi")) == math.pi


def test_addition_subtraction_multiplication_keep_int_for_int_operands():
    for node, expected in [(op("+", 2, 3), 5), (op("-", 2, 3), -1), (op("*", 4, 3), 12)]:
        value = ev(node)
        assert value == expected and type(value) is int


def test_exact_integer_division_stays_int():
    value = ev(op("/", 6, 3))
    assert value == 2 and type(value) is int


def test_inexact_integer_division_is_true_division():
    assert ev(op("/", 7, 2)) == 3.5
    assert ev(op("/", 1, 3)) == pytest.approx(0.3333333333333333)


def test_negative_inexact_division_is_not_floored():
    assert ev(op("/", -7, 2)) == -3.5
    assert ev(BinaryOp("/", UnaryOp("-", Number(1)), Number(4))) == -0.25


def test_float_division():
    assert ev(op("/", 7.0, 2)) == 3.5
    assert ev(op("/", Variable("half"), 2)) == 0.25


def test_division_by_zero_raises_evaluation_error():
    with pytest.raises(EvaluationError) as info:
        ev(op("/", 1, 0))
    assert info.value.message == "division by zero"
    assert isinstance(info.value, ArithmeticError)
    with pytest.raises(EvaluationError):
        ev(op("/", 1.5, 0.0))


def test_power_and_unary_minus():
    assert ev(op("^", 2, 10)) == 1024
    assert ev(op("^", 2, -1)) == 0.5
    assert ev(op("^", 4, 0.5)) == 2.0
    assert ev(UnaryOp("-", op("^", 2, 2))) == -4


def test_power_failures():
    with pytest.raises(EvaluationError) as info:
        ev(op("^", 0, -1))
    assert info.value.message == "division by zero"
    with pytest.raises(EvaluationError) as info:
        ev(op("^", 2, MAX_INT_EXPONENT + 1))
    assert info.value.message == "exponent too large"
    with pytest.raises(EvaluationError) as info:
        ev(op("^", -8, 0.5))
    assert info.value.message == "complex result"


def test_non_finite_results_and_overflow_raise_evaluation_error():
    env = Environment.default().with_variables({"big": 1e200})
    with pytest.raises(EvaluationError):
        ev(op("*", Variable("big"), Variable("big")), env)
    with pytest.raises(EvaluationError):
        ev(op("^", 10.0, 400))


def test_function_calls_evaluate_arguments_first():
    assert ev(Call("max", (Number(1), op("*", Variable("x"), 2), Number(3)))) == 20
    assert ev(Call("sqrt", (op("+", 9, 16),))) == 5.0


def test_function_domain_error_becomes_evaluation_error():
    with pytest.raises(EvaluationError):
        ev(Call("sqrt", (Number(-4),)))


def test_name_errors_propagate_unchanged():
    with pytest.raises(UndefinedNameError) as info:
        ev(op("+", Variable("y"), 1))
    assert info.value.kind == "variable"
    with pytest.raises(UndefinedNameError):
        ev(Call("log", (Number(1),)))
    with pytest.raises(ArityError):
        ev(Call("abs", (Number(1), Number(2))))
