"""Recursive-descent parser: a token list (ending with EOF) to a syntax tree.

Grammar, loosest binding first::

    expr    := term (('+' | '-') term)*          left-associative
    term    := unary (('*' | '/') unary)*        left-associative
    unary   := '-' unary | power
    power   := primary ('^' unary)?              right-associative; -2^2 == -(2^2)
    primary := NUMBER | IDENT | IDENT '(' [expr (',' expr)*] ')' | '(' expr ')'
"""

from __future__ import annotations

from collections.abc import Sequence

from ast_nodes import BinaryOp, Call, Node, Number, UnaryOp, Variable
from tokens import Token, TokenKind, numeric_value

__all__ = ["ParseError", "parse"]

_ADDITIVE = {TokenKind.PLUS: "+", TokenKind.MINUS: "-"}
_MULTIPLICATIVE = {TokenKind.STAR: "*", TokenKind.SLASH: "/"}


class ParseError(ValueError):
    """The token sequence is not a well-formed expression."""

    def __init__(self, message: str, position: int) -> None:
        self.message = message
        self.position = position
        super().__init__(f"{message} at position {position}")


class _Parser:
    def __init__(self, tokens: Sequence[Token]) -> None:
        self.tokens = tokens
        self.index = 0

    def peek(self) -> Token:
        return self.tokens[self.index]

    def advance(self) -> Token:
        token = self.tokens[self.index]
        if token.kind is not TokenKind.EOF:
            self.index += 1
        return token

    def unexpected(self, token: Token) -> ParseError:
        if token.kind is TokenKind.EOF:
            return ParseError("unexpected end of input", token.position)
        return ParseError(f"unexpected token {token.text!r}", token.position)

    def expect(self, kind: TokenKind, what: str) -> Token:
        token = self.peek()
        if token.kind is not kind:
            if token.kind is TokenKind.EOF:
                raise ParseError(f"expected {what}, found end of input", token.position)
            raise ParseError(f"expected {what}, found {token.text!r}", token.position)
        return self.advance()

    def expr(self) -> Node:
        node = self.term()
        while self.peek().kind in _ADDITIVE:
            op = _ADDITIVE[self.advance().kind]
            node = BinaryOp(op, node, self.term())
        return node

    def term(self) -> Node:
        node = self.unary()
        while self.peek().kind in _MULTIPLICATIVE:
            op = _MULTIPLICATIVE[self.advance().kind]
            node = BinaryOp(op, node, self.unary())
        return node

    def unary(self) -> Node:
        if self.peek().kind is TokenKind.MINUS:
            self.advance()
            return UnaryOp("-", self.unary())
        return self.power()

    def power(self) -> Node:
        base = self.primary()
        if self.peek().kind is TokenKind.CARET:
            self.advance()
            return BinaryOp("^", base, self.unary())
        return base

    def primary(self) -> Node:
        token = self.peek()
        if token.kind is TokenKind.NUMBER:
            self.advance()
            return Number(numeric_value(token))
        if token.kind is TokenKind.IDENT:
            self.advance()
            if self.peek().kind is TokenKind.LPAREN:
                self.advance()
                return Call(token.text, tuple(self.arguments()))
            return Variable(token.text)
        if token.kind is TokenKind.LPAREN:
            self.advance()
            node = self.expr()
            self.expect(TokenKind.RPAREN, "')'")
            return node
        raise self.unexpected(token)

    def arguments(self) -> list[Node]:
        args: list[Node] = []
        if self.peek().kind is TokenKind.RPAREN:
            self.advance()
            return args
        args.append(self.expr())
        while self.peek().kind is TokenKind.COMMA:
            self.advance()
            args.append(self.expr())
        self.expect(TokenKind.RPAREN, "')'")
        return args


def parse(tokens: Sequence[Token]) -> Node:
    """Parse a complete expression; every token before EOF must be consumed."""
    if not tokens or tokens[-1].kind is not TokenKind.EOF:
        raise ValueError("token sequence must end with an EOF token")
    if any(t.kind is TokenKind.EOF for t in tokens[:-1]):
        raise ValueError("EOF token may only appear last")
    parser = _Parser(tokens)
    node = parser.expr()
    trailing = parser.peek()
    if trailing.kind is not TokenKind.EOF:
        raise parser.unexpected(trailing)
    return node
