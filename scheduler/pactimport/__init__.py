"""Bringing an existing Pact project: read it unchanged, re-verify it, import it.

The rules, in words:

- **Read, never write.** A Pact project's ``.pact/`` directory is read as Pact wrote
  it (``decomposition/tree.json``, ``contracts/<c>/interface.json`` or the newest
  ``history/<timestamp>.json``, ``contracts/<c>/tests/``, ``implementations/<c>/src/``,
  ``implementations/<c>/test_results.json``, ``decomposition/interview.json``); nothing
  is ever written into it. Every file that cannot be read, or is not what Pact writes,
  is an error naming that file.
- **Re-verify, do not believe.** Recorded results are what Pact saw; our harness runs
  the contract tests again (``pact verify``) and compares total, passed, failed and
  errors per component.
- **Re-use what verifies.** ``pact import`` starts a run in which each artifact Pact
  produced is offered to the harness in place of an agent's answer: accepted, its
  phase is done at cost 0 with its origin recorded; rejected or missing, the phase is
  scheduled for an agent as in any run.
"""

from __future__ import annotations

from scheduler.pactimport.layout import (
    PactComponent,
    PactProject,
    read_pact_project,
    resolve_pact_dir,
)
from scheduler.pactimport.reverify import (
    Counts,
    Reproduction,
    import_closure,
    reverify,
    verifiable,
)

__all__ = [
    "Counts",
    "PactComponent",
    "PactProject",
    "Reproduction",
    "import_closure",
    "read_pact_project",
    "resolve_pact_dir",
    "reverify",
    "verifiable",
]
