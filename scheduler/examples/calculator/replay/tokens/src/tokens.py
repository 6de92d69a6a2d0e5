"""Token vocabulary of the calculator language: token kinds, the token record, symbols."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

__all__ = [
    "SYMBOLS",
    "Token",
    "TokenKind",
    "is_binary_operator",
    "numeric_value",
    "symbol_kind",
]


class TokenKind(Enum):
    """Every kind of token the lexer can produce."""

    NUMBER = "NUMBER"
    IDENT = "IDENT"
    PLUS = "PLUS"
    MINUS = "MINUS"
    STAR = "STAR"
    SLASH = "SLASH"
    CARET = "CARET"
    LPAREN = "LPAREN"
    RPAREN = "RPAREN"
    COMMA = "COMMA"
    EOF = "EOF"


@dataclass(frozen=True)
class Token:
    """One token: its kind, the exact source text, and its 0-based start offset."""

    kind: TokenKind
    text: str
    position: int

    def __post_init__(self) -> None:
        if not isinstance(self.kind, TokenKind):
            raise TypeError(f"kind must be a TokenKind, got {self.kind!r}")
        if not isinstance(self.position, int) or isinstance(self.position, bool):
            raise TypeError(f"position must be an int, got {self.position!r}")
        if self.position < 0:
            raise ValueError(f"position must be >= 0, got {self.position}")


#: Single-character symbols and the token kind each one produces.
SYMBOLS: dict[str, TokenKind] = {
    "+": TokenKind.PLUS,
    "-": TokenKind.MINUS,
    "*": TokenKind.STAR,
    "/": TokenKind.SLASH,
    "^": TokenKind.CARET,
    "(": TokenKind.LPAREN,
    ")": TokenKind.RPAREN,
    ",": TokenKind.COMMA,
}

_BINARY_OPERATORS = frozenset(
    {TokenKind.PLUS, TokenKind.MINUS, TokenKind.STAR, TokenKind.SLASH, TokenKind.CARET}
)


def symbol_kind(char: str) -> TokenKind | None:
    """The kind of the one-character symbol ``char``, or None when it is not a symbol."""
    if len(char) != 1:
        raise ValueError(f"expected exactly one character, got {char!r}")
    return SYMBOLS.get(char)


def is_binary_operator(kind: TokenKind) -> bool:
    """True for PLUS, MINUS, STAR, SLASH and CARET."""
    return kind in _BINARY_OPERATORS


def numeric_value(token: Token) -> int | float:
    """The value of a NUMBER token: int when its text has no '.', float otherwise."""
    if token.kind is not TokenKind.NUMBER:
        raise ValueError(f"not a NUMBER token: {token.kind.value} {token.text!r}")
    if "." in token.text:
        return float(token.text)
    return int(token.text)
