"""Contract tests for the parsing facade: re-exports plus render and variables_of.

Token lists are built by hand (the lexer is not part of this feature): the helper
expects every token separated by one space.
"""

import ast_nodes
import parser
import pytest
from parsing import (
    BinaryOp,
    Number,
    ParseError,
    Variable,
    format_node,
    parse,
    render,
    variables_of,
)
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


def test_facade_reexports_the_children_objects_unchanged():
    assert parse is parser.parse
    assert ParseError is parser.ParseError
    assert BinaryOp is ast_nodes.BinaryOp
    assert format_node is ast_nodes.format_node


def test_render_gives_the_canonical_form():
    assert render(toks("1 + 2 * 3")) == "(1 + (2 * 3))"
    assert render(toks("- x ^ 2 / 4")) == "((-(x ^ 2)) / 4)"


def test_render_of_rendered_text_is_stable():
    first = render(toks("( a - b ) * c"))
    assert first == "((a - b) * c)"
    spaced = " ".join(first.replace("(", "( ").replace(")", " )").split())
    assert render(toks(spaced)) == first


def test_variables_of_is_sorted_and_deduplicated():
    assert variables_of(toks("b + a * b - max ( c , 1 )")) == ["a", "b", "c"]


def test_variables_of_constant_expression_is_empty():
    assert variables_of(toks("sqrt ( 16 ) + 2")) == []


def test_parse_through_facade_builds_ast_nodes():
    assert parse(toks("x - 1")) == BinaryOp("-", Variable("x"), Number(1))


def test_parse_errors_propagate_from_helpers():
    with pytest.raises(ParseError) as info:
        render(toks("( 1"))
    assert info.value.position == 3
    with pytest.raises(ParseError):
        variables_of(toks("a b"))
