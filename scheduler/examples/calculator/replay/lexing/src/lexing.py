"""Lexing feature: the facade over the token vocabulary (tokens) and the lexer (lexer)."""

from __future__ import annotations

from lexer import LexError, tokenize
from tokens import SYMBOLS, Token, TokenKind, is_binary_operator, numeric_value, symbol_kind

__all__ = [
    "SYMBOLS",
    "LexError",
    "Token",
    "TokenKind",
    "is_binary_operator",
    "numeric_value",
    "symbol_kind",
    "token_kinds",
    "token_texts",
    "tokenize",
]


def token_kinds(source: str) -> list[TokenKind]:
    """The kinds of the tokens of ``source``, without the trailing EOF."""
    return [token.kind for token in tokenize(source)[:-1]]


def token_texts(source: str) -> list[str]:
    """The source texts of the tokens of ``source``, without the trailing EOF."""
    return [token.text for token in tokenize(source)[:-1]]
