"""The contract author is told the validation and quality rules it will be held to."""

from __future__ import annotations

from pact_workers.agents.base import AgentRequest
from pact_workers.agents.roles import load_template, prompt_version, render_prompt
from pact_workers.models.work import FailureNote, Phase, Role


def request(attempt: int = 1, feedback: tuple[FailureNote, ...] = ()) -> AgentRequest:
    return AgentRequest(
        run_id="r",
        component_id="tokens",
        phase=Phase.CONTRACT,
        role=Role.CONTRACT_AUTHOR,
        attempt=attempt,
        feedback=feedback,
    )


def test_the_contract_author_moved_to_prompt_v2_and_the_other_roles_did_not() -> None:
    assert prompt_version(Role.CONTRACT_AUTHOR) == "v2"
    assert {prompt_version(r) for r in Role if r is not Role.CONTRACT_AUTHOR} == {"v1"}
    assert render_prompt(request()).version == "v2"
    # The earlier version stays loadable: a run's recorded prompts can be read again.
    assert "structured_side_effects" in load_template(Role.CONTRACT_AUTHOR, "v1")


def test_the_v2_prompt_states_the_specificity_and_side_effect_rules_of_seed_000() -> None:
    system = " ".join(render_prompt(request()).system.split())
    assert (
        'Do not use phrases like "prevents an entire class of failures" without naming the '
        "failure class and the prevention mechanism" in system
    )
    assert "Invariants must be machine-verifiable, not aspirational." in system
    assert (
        'Every function must declare its side effects. Pure functions declare [{"kind": "none"}].'
        in system
    )
    assert "must declare each effect with a target" in system
    assert "An empty list ([]) is an error" in system
    for phrase in ("best practice", "as needed", "robust and reliable", "etc."):
        assert phrase in system
    assert "p95_latency_ms" in system and "external_dependencies" in system


def test_a_rejected_contract_s_findings_reach_the_next_prompt() -> None:
    note = FailureNote(
        attempt=1,
        summary="contract rejected by validation (1 errors):\n- functions[0].description: "
        "vague phrase 'entire class of'",
    )
    prompt = render_prompt(request(attempt=2, feedback=(note,))).user
    assert "functions[0].description: vague phrase 'entire class of'" in prompt
