"""Contract tests for lexer.tokenize and lexer.LexError."""

import pytest
from lexer import LexError, tokenize
from tokens import Token, TokenKind


def kinds(source):
    return [t.kind for t in tokenize(source)]


def test_empty_source_yields_only_eof_at_zero():
    assert tokenize("") == [Token(TokenKind.EOF, "", 0)]


def test_eof_is_last_and_positioned_at_source_length():
    tokens = tokenize("1 + 2  ")
    assert tokens[-1] == Token(TokenKind.EOF, "", 7)
    assert [t for t in tokens if t.kind is TokenKind.EOF] == [tokens[-1]]


def test_simple_expression_kinds_texts_and_positions():
    assert tokenize("12+x") == [
        Token(TokenKind.NUMBER, "12", 0),
        Token(TokenKind.PLUS, "+", 2),
        Token(TokenKind.IDENT, "x", 3),
        Token(TokenKind.EOF, "", 4),
    ]


def test_every_symbol_is_recognised():
    assert kinds("+-*/^(),") == [
        TokenKind.PLUS, TokenKind.MINUS, TokenKind.STAR, TokenKind.SLASH,
        TokenKind.CARET, TokenKind.LPAREN, TokenKind.RPAREN, TokenKind.COMMA,
        TokenKind.EOF,
    ]


def test_whitespace_is_skipped_but_positions_count_it():
    tokens = tokenize(" \t3\n*\r\n y")
    assert [(t.kind, t.text, t.position) for t in tokens] == [
        (TokenKind.NUMBER, "3", 2),
        (TokenKind.STAR, "*", 4),
        (TokenKind.IDENT, "y", 8),
        (TokenKind.EOF, "", 9),
    ]


def test_decimal_number_is_one_token():
    tokens = tokenize("3.25")
    assert tokens[0] == Token(TokenKind.NUMBER, "3.25", 0)
    assert len(tokens) == 2


def test_identifiers_take_letters_digits_and_underscores():
    tokens = tokenize("_rate2 max")
    assert [(t.kind, t.text) for t in tokens[:-1]] == [
        (TokenKind.IDENT, "_rate2"), (TokenKind.IDENT, "max"),
    ]


def test_number_directly_followed_by_letter_splits_into_two_tokens():
    assert [(t.kind, t.text) for t in tokenize("2x")[:-1]] == [
        (TokenKind.NUMBER, "2"), (TokenKind.IDENT, "x"),
    ]


def test_unknown_character_raises_lex_error_with_position():
    with pytest.raises(LexError) as info:
        tokenize("1 + #")
    assert info.value.position == 4
    assert info.value.character == "#"
    assert isinstance(info.value, ValueError)


def test_trailing_dot_without_digits_is_rejected_at_the_dot():
    with pytest.raises(LexError) as info:
        tokenize("3.")
    assert info.value.position == 1


def test_leading_dot_and_second_dot_are_rejected():
    with pytest.raises(LexError) as info:
        tokenize(".5")
    assert info.value.position == 0
    with pytest.raises(LexError) as info:
        tokenize("1.2.3")
    assert info.value.position == 3


def test_non_ascii_letter_is_rejected():
    with pytest.raises(LexError) as info:
        tokenize("π")
    assert info.value.position == 0


def test_non_string_source_raises_type_error():
    with pytest.raises(TypeError):
        tokenize(12)
