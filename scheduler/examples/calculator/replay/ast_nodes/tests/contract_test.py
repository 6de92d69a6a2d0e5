"""Contract tests for ast_nodes: node validation, immutability, format_node, free_variables."""

import dataclasses

import pytest
from ast_nodes import (
    BINARY_OPERATORS,
    BinaryOp,
    Call,
    Number,
    UnaryOp,
    Variable,
    format_node,
    free_variables,
)


def test_nodes_are_frozen_and_compare_by_value():
    a = BinaryOp("+", Number(1), Variable("x"))
    assert a == BinaryOp("+", Number(1), Variable("x"))
    assert hash(a) == hash(BinaryOp("+", Number(1), Variable("x")))
    with pytest.raises(dataclasses.FrozenInstanceError):
        a.op = "-"


def test_number_accepts_int_and_float_only():
    assert Number(3).value == 3
    assert Number(0.5).value == 0.5
    with pytest.raises(TypeError):
        Number(True)
    with pytest.raises(TypeError):
        Number("3")


def test_variable_and_call_names_must_be_ascii_identifiers():
    with pytest.raises(ValueError):
        Variable("2x")
    with pytest.raises(ValueError):
        Variable("")
    with pytest.raises(ValueError):
        Call("my-func", ())


def test_operator_sets_are_enforced():
    assert frozenset({"+", "-", "*", "/", "^"}) == BINARY_OPERATORS
    with pytest.raises(ValueError):
        BinaryOp("%", Number(1), Number(2))
    with pytest.raises(ValueError):
        UnaryOp("+", Number(1))


def test_children_must_be_nodes():
    with pytest.raises(TypeError):
        BinaryOp("+", 1, Number(2))
    with pytest.raises(TypeError):
        Call("max", (Number(1), 2))


def test_call_args_are_stored_as_a_tuple():
    call = Call("max", [Number(1), Number(2)])
    assert call.args == (Number(1), Number(2))
    assert isinstance(call.args, tuple)
    assert Call("f").args == ()


def test_format_node_parenthesises_every_operation():
    tree = BinaryOp("+", Number(1), BinaryOp("*", Number(2), Variable("x")))
    assert format_node(tree) == "(1 + (2 * x))"
    assert format_node(UnaryOp("-", BinaryOp("^", Number(2), Number(2)))) == "(-(2 ^ 2))"


def test_format_node_numbers_and_calls():
    assert format_node(Number(2.5)) == "2.5"
    assert format_node(Number(4.0)) == "4.0"
    assert format_node(Number(7)) == "7"
    assert format_node(Call("max", (Number(1), Variable("y")))) == "max(1, y)"
    assert format_node(Call("f", ())) == "f()"


def test_free_variables_excludes_function_names():
    tree = BinaryOp(
        "-",
        Call("max", (Variable("a"), UnaryOp("-", Variable("b")))),
        BinaryOp("/", Variable("a"), Number(2)),
    )
    assert free_variables(tree) == frozenset({"a", "b"})
    assert free_variables(Call("max", (Number(1),))) == frozenset()


def test_format_and_free_variables_reject_non_nodes():
    with pytest.raises(TypeError):
        format_node("1 + 2")
    with pytest.raises(TypeError):
        free_variables(42)
