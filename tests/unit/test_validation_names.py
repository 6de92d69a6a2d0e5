"""Dependency names read as the tree's ids (seed 000, 2.3)."""

from __future__ import annotations

import random

from scheduler.validation import NameIndex, normalize_dependency_name
from scheduler.validation.names import MatchRule

KNOWN = ["shaping_schemas", "config_schemas", "lexer", "ast_nodes"]


def test_exact_match() -> None:
    assert normalize_dependency_name("shaping_schemas", KNOWN) == "shaping_schemas"


def test_transposition() -> None:
    assert normalize_dependency_name("schemas_shaping", ["shaping_schemas"]) == "shaping_schemas"


def test_no_match_returns_none() -> None:
    assert normalize_dependency_name("totally_unknown", KNOWN) is None


def test_ambiguous_returns_none() -> None:
    assert normalize_dependency_name("schemas", ["shaping_schemas", "config_schemas"]) is None


def test_case_insensitive() -> None:
    assert normalize_dependency_name("Shaping_Schemas", KNOWN) == "shaping_schemas"


def test_a_name_with_one_extra_word_is_read_as_the_id_when_only_one_fits() -> None:
    assert normalize_dependency_name("my_schemas", ["schemas", "lexer"]) == "schemas"
    assert normalize_dependency_name("schemas", ["shaping_schemas", "lexer"]) == "shaping_schemas"
    assert normalize_dependency_name("nodes", KNOWN) == "ast_nodes"


def test_hyphens_and_case_together_count_as_a_case_difference() -> None:
    match = NameIndex(KNOWN).match("AST-Nodes")
    assert match is not None and match.component_id == "ast_nodes"
    assert match.rule is MatchRule.CASE


def test_transposition_ignores_case_and_reports_its_rule() -> None:
    match = NameIndex(KNOWN).match("Nodes_AST")
    assert match is not None and (match.component_id, match.rule) == (
        "ast_nodes",
        MatchRule.TRANSPOSITION,
    )


def test_dotted_names_are_modules_and_only_match_exactly() -> None:
    assert normalize_dependency_name("agents.base", ["agents_base", "base"]) is None
    assert normalize_dependency_name("src/lexer.py", KNOWN) is None


def test_two_ids_equal_but_for_case_make_the_name_ambiguous() -> None:
    assert normalize_dependency_name("LEXER", ["Lexer", "lexer_x", "lexER"]) is None


def test_normalization_is_deterministic_and_returns_known_ids_only() -> None:
    rng = random.Random(7)
    words = ["shaping", "schemas", "config", "lexer", "nodes", "ast", "my", "x"]
    for _ in range(300):
        raw = "_".join(rng.sample(words, rng.randint(1, 3)))
        first = normalize_dependency_name(raw, KNOWN)
        assert first == normalize_dependency_name(raw, list(reversed(KNOWN)))
        assert first is None or first in KNOWN
