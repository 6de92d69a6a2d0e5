"""The teachback checker: a mechanical review of a teachback against the contract.

Rules: a teachback is approved when it names every function of the contract and
every error case of each function (by function and error-case name), names no
function or error case the contract does not have, uses no component outside the
component's own dependencies (its scope), and restates the right component. Each
rule broken is one finding, written so that the agent can correct it.
"""

from __future__ import annotations

from dataclasses import dataclass

from pact_workers.models.contract import ComponentContract
from pact_workers.models.teachback import Teachback
from scheduler.gates.reviewers import Verdict


@dataclass(frozen=True)
class TeachbackSubject:
    """A teachback and what it is checked against."""

    teachback: Teachback
    contract: ComponentContract
    #: Components the work may use: its dependencies (and children, for a parent).
    allowed: frozenset[str]


class TeachbackChecker:
    """The mechanical reviewer of teachbacks (see the module rules)."""

    name = "checker"

    def review(self, subject: TeachbackSubject) -> Verdict:
        findings = check_teachback(subject)
        return Verdict(reviewer=self.name, approved=not findings, findings=findings)


def check_teachback(subject: TeachbackSubject) -> list[str]:
    """Every way the teachback falls short of the contract (empty: approved)."""
    teachback, contract = subject.teachback, subject.contract
    findings: list[str] = []
    named = set(teachback.functions)
    for function in contract.functions:
        if function.name not in named:
            findings.append(f"function {function.name!r} is not named")
    known = {f.name for f in contract.functions}
    for name in sorted(named - known):
        findings.append(f"function {name!r} is not in the contract (outside the scope)")
    cases = {(c.function, c.name) for c in teachback.error_cases}
    expected = {(f.name, e.name) for f in contract.functions for e in f.error_cases}
    for function in contract.functions:
        for case in function.error_cases:
            if (function.name, case.name) not in cases:
                findings.append(
                    f"error case {case.name!r} of function {function.name!r} is not named "
                    f"({case.error_type} when {case.condition})"
                )
    for function_name, case_name in sorted(cases - expected):
        findings.append(
            f"error case {case_name!r} of function {function_name!r} is not in the contract"
        )
    own = contract.component_id
    for used in sorted(set(teachback.uses) - subject.allowed - {own}):
        findings.append(
            f"component {used!r} is outside the scope ({own!r} may use only "
            f"{', '.join(sorted(subject.allowed)) or 'no other component'})"
        )
    return findings
