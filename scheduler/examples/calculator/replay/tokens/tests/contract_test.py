"""Contract tests for tokens: TokenKind, Token, SYMBOLS, symbol_kind, is_binary_operator,
numeric_value."""

import dataclasses

import pytest
from tokens import SYMBOLS, Token, TokenKind, is_binary_operator, numeric_value, symbol_kind


def test_token_kinds_are_exactly_the_eleven_declared():
    assert {k.name for k in TokenKind} == {
        "NUMBER", "IDENT", "PLUS", "MINUS", "STAR", "SLASH",
        "CARET", "LPAREN", "RPAREN", "COMMA", "EOF",
    }


def test_token_is_frozen_and_compares_by_value():
    a = Token(TokenKind.NUMBER, "12", 3)
    assert a == Token(TokenKind.NUMBER, "12", 3)
    assert hash(a) == hash(Token(TokenKind.NUMBER, "12", 3))
    with pytest.raises(dataclasses.FrozenInstanceError):
        a.text = "13"


def test_token_rejects_negative_position():
    with pytest.raises(ValueError):
        Token(TokenKind.PLUS, "+", -1)


def test_token_rejects_kind_that_is_not_a_token_kind():
    with pytest.raises(TypeError):
        Token("PLUS", "+", 0)


def test_symbols_map_each_symbol_character_to_its_kind():
    assert SYMBOLS == {
        "+": TokenKind.PLUS, "-": TokenKind.MINUS, "*": TokenKind.STAR,
        "/": TokenKind.SLASH, "^": TokenKind.CARET, "(": TokenKind.LPAREN,
        ")": TokenKind.RPAREN, ",": TokenKind.COMMA,
    }


def test_symbol_kind_returns_none_for_non_symbols():
    assert symbol_kind("^") is TokenKind.CARET
    assert symbol_kind("a") is None
    assert symbol_kind("7") is None
    assert symbol_kind("%") is None


def test_symbol_kind_requires_exactly_one_character():
    with pytest.raises(ValueError):
        symbol_kind("")
    with pytest.raises(ValueError):
        symbol_kind("**")


def test_is_binary_operator():
    binary = {k for k in TokenKind if is_binary_operator(k)}
    assert binary == {TokenKind.PLUS, TokenKind.MINUS, TokenKind.STAR,
                      TokenKind.SLASH, TokenKind.CARET}


def test_numeric_value_int_and_float():
    whole = numeric_value(Token(TokenKind.NUMBER, "42", 0))
    assert whole == 42 and type(whole) is int
    frac = numeric_value(Token(TokenKind.NUMBER, "2.50", 0))
    assert frac == 2.5 and type(frac) is float


def test_numeric_value_rejects_non_number_tokens():
    with pytest.raises(ValueError):
        numeric_value(Token(TokenKind.IDENT, "x", 0))
