"""Contract tests for parser.parse and parser.ParseError.

The lexer is not a dependency of the parser, so the tests build token lists with a
small helper: the source must separate every token with one space.
"""

import pytest
from ast_nodes import BinaryOp, Call, Number, UnaryOp, Variable, format_node
from parser import ParseError, parse
from tokens import SYMBOLS, Token, TokenKind


def toks(source):
    result, position = [], 0
    for text in source.split(" ") if source else []:
        if text in SYMBOLS:
            kind = SYMBOLS[text]
        elif text[0].isdigit():
            kind = TokenKind.NUMBER
        else:
            kind = TokenKind.IDENT
        result.append(Token(kind, text, position))
        position += len(text) + 1
    result.append(Token(TokenKind.EOF, "", len(source)))
    return result


def shape(source):
    return format_node(parse(toks(source)))


def test_single_number_and_variable():
    assert parse(toks("42")) == Number(42)
    assert parse(toks("2.5")) == Number(2.5)
    assert parse(toks("x")) == Variable("x")


def test_multiplication_binds_tighter_than_addition():
    assert parse(toks("1 + 2 * 3")) == BinaryOp(
        "+", Number(1), BinaryOp("*", Number(2), Number(3))
    )


def test_additive_and_multiplicative_operators_are_left_associative():
    assert shape("8 - 3 - 2") == "((8 - 3) - 2)"
    assert shape("8 / 4 / 2") == "((8 / 4) / 2)"


def test_power_is_right_associative_and_binds_tighter_than_product():
    assert shape("2 ^ 3 ^ 2") == "(2 ^ (3 ^ 2))"
    assert shape("2 * 3 ^ 2") == "(2 * (3 ^ 2))"


def test_unary_minus_applies_after_power():
    assert parse(toks("- 2 ^ 2")) == UnaryOp("-", BinaryOp("^", Number(2), Number(2)))
    assert shape("2 ^ - 1") == "(2 ^ (-1))"
    assert shape("- - x") == "(-(-x))"


def test_parentheses_override_precedence():
    assert shape("( 1 + 2 ) * 3") == "((1 + 2) * 3)"


def test_function_calls_with_zero_one_and_many_arguments():
    assert parse(toks("f ( )")) == Call("f", ())
    assert parse(toks("sqrt ( x )")) == Call("sqrt", (Variable("x"),))
    assert parse(toks("max ( 1 , a + 1 , 3 )")) == Call(
        "max", (Number(1), BinaryOp("+", Variable("a"), Number(1)), Number(3))
    )


def test_empty_input_is_a_parse_error_at_eof():
    with pytest.raises(ParseError) as info:
        parse(toks(""))
    assert info.value.position == 0
    assert isinstance(info.value, ValueError)


def test_missing_operand_reports_eof_position():
    with pytest.raises(ParseError) as info:
        parse(toks("1 +"))
    assert info.value.position == 3


def test_unclosed_parenthesis_is_reported_at_eof():
    with pytest.raises(ParseError) as info:
        parse(toks("( 1 + 2"))
    assert info.value.position == 7


def test_trailing_token_is_reported_at_its_position():
    with pytest.raises(ParseError) as info:
        parse(toks("1 2"))
    assert info.value.position == 2
    with pytest.raises(ParseError) as info:
        parse(toks("( 1 ) )"))
    assert info.value.position == 6


def test_operator_in_operand_position_is_reported():
    with pytest.raises(ParseError) as info:
        parse(toks("* 3"))
    assert info.value.position == 0
    with pytest.raises(ParseError) as info:
        parse(toks("max ( 1 , )"))
    assert info.value.position == 10


def test_token_list_must_end_with_eof():
    with pytest.raises(ValueError):
        parse([])
    with pytest.raises(ValueError):
        parse([Token(TokenKind.NUMBER, "1", 0)])
