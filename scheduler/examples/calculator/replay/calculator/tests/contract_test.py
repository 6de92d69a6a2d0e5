"""End-to-end contract tests for the calculator: evaluate, explain, required_variables."""

import math

import pytest
from calculator import STAGES, CalculatorError, evaluate, explain, required_variables
from evaluation import EvaluationError
from lexing import LexError
from parsing import ParseError


def test_operator_precedence():
    assert evaluate("1 + 2 * 3") == 7
    assert evaluate("(1 + 2) * 3") == 9
    assert evaluate("2 * 3 ^ 2") == 18


def test_associativity_and_unary_minus():
    assert evaluate("10 - 4 - 3") == 3
    assert evaluate("2 ^ 3 ^ 2") == 512
    assert evaluate("-2 ^ 2") == -4
    assert evaluate("2 ^ -2") == 0.25


def test_division_is_exact_when_possible_and_true_otherwise():
    value = evaluate("8 / 4")
    assert value == 2 and type(value) is int
    assert evaluate("7 / 2") == 3.5
    assert evaluate("-7 / 2") == -3.5


def test_variables_constants_and_functions():
    assert evaluate("2 * r + 1", {"r": 4}) == 9
    assert evaluate("pi * r ^ 2", {"r": 2}) == pytest.approx(4 * math.pi)
    assert evaluate("max(1, sqrt(16), abs(-3))") == 4.0
    assert evaluate("  min(a, b)  ", {"a": 3, "b": -1.5}) == -1.5


def test_lex_errors_are_calculator_errors():
    with pytest.raises(CalculatorError) as info:
        evaluate("3 # 4")
    err = info.value
    assert (err.stage, err.position) == ("lex", 2)
    assert isinstance(err.__cause__, LexError)
    assert isinstance(err, ValueError)


def test_parse_errors_are_calculator_errors():
    with pytest.raises(CalculatorError) as info:
        evaluate("(1 + 2")
    assert (info.value.stage, info.value.position) == ("parse", 6)
    assert isinstance(info.value.__cause__, ParseError)
    with pytest.raises(CalculatorError) as info:
        evaluate("")
    assert (info.value.stage, info.value.position) == ("parse", 0)


def test_evaluation_errors_are_calculator_errors():
    with pytest.raises(CalculatorError) as info:
        evaluate("1 / (2 - 2)")
    assert info.value.stage == "evaluate"
    assert info.value.position is None
    assert isinstance(info.value.__cause__, EvaluationError)


def test_unknown_names_and_bad_arity_are_evaluation_stage_errors():
    for source in ["x + 1", "log(2)", "sqrt(1, 2)"]:
        with pytest.raises(CalculatorError) as info:
            evaluate(source)
        assert info.value.stage == "evaluate", source


def test_invalid_variables_are_input_stage_errors():
    with pytest.raises(CalculatorError) as info:
        evaluate("1", {"bad name": 1})
    assert info.value.stage == "input"
    with pytest.raises(CalculatorError) as info:
        evaluate("x", {"x": "3"})
    assert info.value.stage == "input"
    assert STAGES == ("input", "lex", "parse", "evaluate")


def test_non_string_expression_raises_type_error():
    with pytest.raises(TypeError):
        evaluate(3)


def test_explain_returns_the_canonical_form_without_evaluating():
    assert explain("1 + 2 * 3") == "(1 + (2 * 3))"
    assert explain("-x^2 / max(a, 2.5)") == "((-(x ^ 2)) / max(a, 2.5))"
    assert explain("1 / 0") == "(1 / 0)"
    with pytest.raises(CalculatorError) as info:
        explain("1 +")
    assert info.value.stage == "parse"


def test_required_variables_excludes_constants_and_function_names():
    assert required_variables("pi * r ^ 2 + max(h, r)") == ["h", "r"]
    assert required_variables("sqrt(2) * e") == []
