"""Contract tests for the lexing facade: re-exports plus token_kinds and token_texts."""

import lexer
import pytest
import tokens
from lexing import LexError, Token, TokenKind, numeric_value, token_kinds, token_texts, tokenize


def test_facade_reexports_the_children_objects_unchanged():
    assert tokenize is lexer.tokenize
    assert LexError is lexer.LexError
    assert Token is tokens.Token
    assert TokenKind is tokens.TokenKind


def test_token_kinds_omits_eof():
    assert token_kinds("a*(b-1)") == [
        TokenKind.IDENT, TokenKind.STAR, TokenKind.LPAREN, TokenKind.IDENT,
        TokenKind.MINUS, TokenKind.NUMBER, TokenKind.RPAREN,
    ]


def test_token_texts_omits_eof_and_whitespace():
    assert token_texts(" max( 1.5 ,x ) ") == ["max", "(", "1.5", ",", "x", ")"]


def test_empty_and_blank_sources_give_empty_lists():
    assert token_kinds("") == []
    assert token_texts("   \n") == []


def test_number_tokens_convert_through_the_facade():
    values = [numeric_value(t) for t in tokenize("7 0.5") if t.kind is TokenKind.NUMBER]
    assert values == [7, 0.5]
    assert type(values[0]) is int


def test_lex_errors_propagate_from_helpers():
    with pytest.raises(LexError) as info:
        token_kinds("2 $ 3")
    assert info.value.position == 2
    with pytest.raises(LexError):
        token_texts("a = 1")


def test_tokenize_through_facade_ends_with_eof():
    result = tokenize("1+1")
    assert result[-1] == Token(TokenKind.EOF, "", 3)
    assert len(result) == 4
