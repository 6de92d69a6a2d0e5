"""What a code author is shown, in tiers that fit a token budget (seed 000, section 6.6).

Tier 1 (always, never truncated): the contract, and the contract test suite as its list
of test cases (ids, descriptions, categories, expectations). The suite's source is never
included: the code author writes against the contract and what the tests check, not
against the tests' code (the adversarial split). Tier 2 (if room): a summary of the
decisions relevant to the component, then the lessons of earlier runs' retrospectives
(those naming the component first). Tier 3 (only when asked for, if room): a summary
of research findings.
"""

from __future__ import annotations

import json

from pact_workers.models.contract import ComponentContract
from pact_workers.models.testing import ContractTestSuite

#: Rough size of a token in characters, for budgeting (no tokenizer needed).
CHARS_PER_TOKEN = 4


def estimate_tokens(text: str) -> int:
    return (len(text) + CHARS_PER_TOKEN - 1) // CHARS_PER_TOKEN


def summarise_test_cases(test_suite: ContractTestSuite) -> str:
    """What the tests check, without their code."""
    lines = [
        f"Contract tests for {test_suite.component_id} "
        f"(contract version {test_suite.contract_version}):"
    ]
    for case in test_suite.test_cases:
        expect = case.expected_error or case.expected_output_description
        line = f"- {case.id} [{case.category}] {case.function}: {case.description}"
        lines.append(f"{line} -> {expect}" if expect else line)
    if not test_suite.test_cases:
        lines.append("- (the suite lists no test cases; satisfy every function of the contract)")
    return "\n".join(lines)


def build_code_agent_context(
    contract: ComponentContract,
    test_suite: ContractTestSuite,
    decisions: list[str] | None = None,
    research: list[dict[str, object]] | None = None,
    max_tokens: int = 8000,
    *,
    lessons: list[str] | None = None,
) -> str:
    """Build the tiered context for a code author; see the module docstring.

    Postconditions: the result fits ``max_tokens`` (estimated) unless tier 1 alone does
    not, in which case tier 1 is returned whole; tiers 2 and 3 are cut line by line.
    """
    tier1 = (
        "## Contract (interface.json)\n"
        + json.dumps(contract.model_dump(mode="json", exclude_defaults=True), indent=2)
        + "\n\n## What the contract tests check\n"
        + summarise_test_cases(test_suite)
    )
    parts = [tier1]
    budget = max_tokens - estimate_tokens(tier1)
    for title, lines in (
        ("## Decisions relevant to this component", _decision_lines(decisions, contract)),
        ("## Lessons from earlier runs", _lesson_lines(lessons, contract)),
        ("## Research findings (summary)", _research_lines(research)),
    ):
        if not lines or budget <= 0:
            continue
        section = [title]
        cost = estimate_tokens(title) + 1
        for line in lines:
            line_cost = estimate_tokens(line) + 1
            if cost + line_cost > budget:
                break
            section.append(line)
            cost += line_cost
        if len(section) > 1:
            parts.append("\n".join(section))
            budget -= cost
    return "\n\n".join(parts)


def _decision_lines(decisions: list[str] | None, contract: ComponentContract) -> list[str]:
    """Decisions summarised: one line each, the ones naming the component first."""
    if not decisions:
        return []
    names = {contract.component_id.lower(), contract.name.lower()}
    ranked = sorted(decisions, key=lambda d: not any(n in d.lower() for n in names))
    return [f"- {_first_sentence(d)}" for d in ranked]


def _lesson_lines(lessons: list[str] | None, contract: ComponentContract) -> list[str]:
    """Lessons of earlier runs' retrospectives (tier 2): those naming the component
    first, each kept whole (a lesson cut in half would mislead)."""
    if not lessons:
        return []
    cid = contract.component_id.lower()
    ranked = sorted(lessons, key=lambda text: cid not in text.lower())
    return [f"- {' '.join(text.split())}" for text in ranked]


def _research_lines(research: list[dict[str, object]] | None) -> list[str]:
    if not research:
        return []
    out = []
    for finding in research:
        topic = str(finding.get("topic", "")).strip()
        text = _first_sentence(str(finding.get("finding", "")))
        out.append(f"- {topic}: {text}" if topic else f"- {text}")
    return out


def _first_sentence(text: str, limit: int = 240) -> str:
    text = " ".join(text.split())
    end = text.find(". ")
    sentence = text if end == -1 else text[: end + 1]
    return sentence if len(sentence) <= limit else sentence[: limit - 3] + "..."
