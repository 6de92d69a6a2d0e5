"""build_code_agent_context, seed 000 section 6.6."""

from __future__ import annotations

import json

from pact_workers.agents.context import build_code_agent_context, estimate_tokens
from pact_workers.models import ComponentContract, ContractTestSuite, TestCase
from tests.conftest import shared_data

CONTRACT = ComponentContract.model_validate_json(
    shared_data("pact-bench", "2012_D", "base", "interface.json").read_text()
)
SUITE = ContractTestSuite(
    component_id="fibonacci_words",
    contract_version=1,
    test_cases=[
        TestCase(
            id="t1",
            description="single char pattern counts",
            function="count_overlapping",
            category="happy_path",
            expected_output_description="5",
        ),
        TestCase(
            id="t2",
            description="empty pattern raises",
            function="build_failure",
            category="error_case",
            expected_error="ValueError",
        ),
    ],
    generated_code="def test_secret_source():\n    assert HIDDEN_FROM_THE_CODE_AUTHOR\n",
)
DECISIONS = [
    "Use KMP for overlapping matches in fibonacci_words. It avoids quadratic scans.",
    "Unrelated: the CLI prints one line per case.",
]
RESEARCH = [{"topic": "KMP", "finding": "Prefix function is O(m). Many details follow."}]


def test_always_includes_contract_and_tests() -> None:
    text = build_code_agent_context(CONTRACT, SUITE, DECISIONS, RESEARCH, max_tokens=100)
    assert '"component_id": "fibonacci_words"' in text
    assert "t1 [happy_path] count_overlapping" in text and "t2 [error_case]" in text


def test_excludes_research_by_default() -> None:
    text = build_code_agent_context(CONTRACT, SUITE, DECISIONS, max_tokens=100_000)
    assert "Research findings" not in text and "Prefix function" not in text


def test_includes_decisions_if_room() -> None:
    text = build_code_agent_context(CONTRACT, SUITE, DECISIONS, max_tokens=100_000)
    assert "Use KMP for overlapping matches in fibonacci_words." in text
    assert "It avoids quadratic scans" not in text  # summarised, not verbatim
    assert text.index("Use KMP") < text.index("Unrelated")  # relevant first


def test_truncates_gracefully() -> None:
    tier1_only = build_code_agent_context(CONTRACT, SUITE, max_tokens=10)
    text = build_code_agent_context(CONTRACT, SUITE, DECISIONS, RESEARCH, max_tokens=10)
    assert text == tier1_only
    roomy = build_code_agent_context(CONTRACT, SUITE, DECISIONS, RESEARCH, max_tokens=100_000)
    assert "Research findings" in roomy
    budget = estimate_tokens(tier1_only) + 30
    partial = build_code_agent_context(CONTRACT, SUITE, DECISIONS, RESEARCH, max_tokens=budget)
    assert estimate_tokens(partial) <= budget


def test_the_test_source_is_never_shown() -> None:
    text = build_code_agent_context(CONTRACT, SUITE, DECISIONS, RESEARCH, max_tokens=100_000)
    assert "HIDDEN_FROM_THE_CODE_AUTHOR" not in text and "def test_secret_source" not in text
    json.loads(text.split("## Contract (interface.json)\n", 1)[1].split("\n\n## ", 1)[0])
