"""Turns calculator source text into a list of tokens ending with EOF."""

from __future__ import annotations

from tokens import Token, TokenKind, symbol_kind

__all__ = ["LexError", "tokenize"]

_WHITESPACE = frozenset(" \t\r\n")
_DIGITS = frozenset("0123456789")
_IDENT_START = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_")
_IDENT_REST = _IDENT_START | _DIGITS


class LexError(ValueError):
    """A character that cannot start or continue a token."""

    def __init__(self, character: str, position: int) -> None:
        self.character = character
        self.position = position
        super().__init__(f"unexpected character {character!r} at position {position}")


def tokenize(source: str) -> list[Token]:
    """Split ``source`` into tokens; the last token is always EOF at ``len(source)``."""
    if not isinstance(source, str):
        raise TypeError(f"source must be a str, got {type(source).__name__}")
    result: list[Token] = []
    i = 0
    n = len(source)
    while i < n:
        ch = source[i]
        if ch in _WHITESPACE:
            i += 1
            continue
        if ch in _DIGITS:
            start = i
            while i < n and source[i] in _DIGITS:
                i += 1
            if i < n and source[i] == ".":
                if i + 1 >= n or source[i + 1] not in _DIGITS:
                    raise LexError(".", i)
                i += 1
                while i < n and source[i] in _DIGITS:
                    i += 1
            result.append(Token(TokenKind.NUMBER, source[start:i], start))
            continue
        if ch in _IDENT_START:
            start = i
            while i < n and source[i] in _IDENT_REST:
                i += 1
            result.append(Token(TokenKind.IDENT, source[start:i], start))
            continue
        kind = symbol_kind(ch)
        if kind is None:
            raise LexError(ch, i)
        result.append(Token(kind, ch, i))
        i += 1
    result.append(Token(TokenKind.EOF, "", n))
    return result
