"""The gates through the CLI as a user runs them: pact demo with gates in pact.yaml,
pact status showing them, and the review queue (pact review, approve, reject)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.acceptance.test_cli import pact

GATED = "ast_nodes/implement"


def events(project: Path) -> list[dict[str, Any]]:
    lines = (project / ".pact" / "audit.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def status(project: Path) -> dict[str, Any]:
    done = pact("status", str(project), "--json")
    assert done.returncode == 0, done.stderr
    shown: dict[str, Any] = json.loads(done.stdout)
    return shown


def test_demo_with_gates_blocking_completes_and_shows_the_teachback_at_work(
    tmp_path: Path,
) -> None:
    project = tmp_path / "demo"
    project.mkdir()
    (project / "pact.yaml").write_text("gates: blocking\n")
    done = pact("demo", str(project))
    assert done.returncode == 0, done.stderr
    log = [e for e in events(project) if e.get("component_id") == "ast_nodes"]
    kinds = [e["type"] for e in log if e.get("phase") == "implement"]
    assert kinds.index("teachback_reviewed") < kinds.index("item_succeeded")
    verdicts = [e["approved"] for e in log if e["type"] == "teachback_reviewed"]
    assert verdicts == [False, True, True]  # checker, checker, then the auditor
    gates = status(project)["gates"]
    assert gates["items"][GATED]["score"] >= 7
    assert gates["items"][GATED]["teachback_rounds"] == 1
    assert gates["items"]["lexer/implement"]["gates"]["teachback_mode"] == "advisory"
    shown = pact("status", str(project))
    assert "ast_nodes/implement: score 7" in shown.stdout
    assert "1 teachback(s) corrected" in shown.stdout
    # The totals by route come first, then the item a gate acted on, then the rest.
    scored = [i for k, i in gates["items"].items() if not k.endswith(("/contract", "/test"))]
    routes = Counter(item["gates"]["workflow_route"] for item in scored)
    assert gates["routes"] == dict(sorted(routes.items())) and routes["orchestrate"] >= 1
    lines = [line for line in shown.stdout.splitlines() if line.startswith("gates: ")]
    by_route = ", ".join(f"{n} {route}" for route, n in sorted(routes.items()))
    assert lines[0].startswith(
        f"gates: {len(scored)} implement/integrate item(s) scored: {by_route};"
    )
    assert lines[1].startswith("gates: ast_nodes/implement: score 7")
    assert len(lines) == 1 + len(scored)


def hold(project: Path, example: Path) -> Path:
    """Run the example with review: gated into ``project``: it stops with ast_nodes
    awaiting review."""
    project.mkdir()
    (project / "pact.yaml").write_text("review: gated\n")
    done = pact(
        "run",
        str(example / "tree.json"),
        "--project",
        str(project),
        "--replay-dir",
        str(example / "replay"),
    )
    assert done.returncode == 3, done.stderr
    assert "await review" in done.stdout
    return project


@pytest.fixture
def held_run(tmp_path: Path, example: Path) -> Path:
    return hold(tmp_path / "p", example)


@pytest.fixture(scope="module")
def held_once(tmp_path_factory: pytest.TempPathFactory, example: Path) -> Path:
    """One held run for the tests that must change nothing."""
    return hold(tmp_path_factory.mktemp("held") / "p", example)


def test_review_gated_stops_with_the_item_awaiting_review_and_approve_completes_the_run(
    held_run: Path,
) -> None:
    shown = status(held_run)
    assert shown["status"] == "paused"
    assert shown["items"]["awaiting_review"] == 1
    assert shown["gates"]["awaiting_review"] == [GATED]
    assert not (held_run / ".pact" / "implementations" / "ast_nodes").exists()
    listed = pact("review", str(held_run))
    assert listed.returncode == 0
    assert "ast_nodes/implement (attempt 1, variety score 7): 10/10 passed" in listed.stdout
    assert "+++ b/.pact/implementations/ast_nodes/src/ast_nodes.py" in listed.stdout
    queue = json.loads(pact("review", str(held_run), "--json").stdout)
    assert [entry["item"] for entry in queue] == [GATED]

    done = pact("approve", str(held_run), "ast_nodes", "--note", "reads well", "--by", "alice")
    assert done.returncode == 0, done.stderr
    assert status(held_run)["status"] == "completed"
    assert (held_run / ".pact" / "implementations" / "ast_nodes" / "src" / "ast_nodes.py").is_file()
    decided = [e for e in events(held_run) if e["type"] == "review_decided"]
    assert [(e["approved"], e["by"], e["note"]) for e in decided] == [(True, "alice", "reads well")]
    assert pact("review", str(held_run)).stdout.strip() == "no item awaits review"
    saved = json.loads(pact("retrospective", str(held_run), "--json").stdout)
    assert saved["saved"] is True
    assert [b["item"] for b in saved["would_have_blocked"]] == [GATED]


def test_reject_sends_the_note_as_feedback_to_a_new_attempt(held_run: Path) -> None:
    note = "format_node must not add spaces inside parentheses"
    done = pact("reject", str(held_run), GATED, "--note", note, "--by", "bob")
    assert done.returncode == 3, done.stderr  # the new attempt waits for review again
    log = [e for e in events(held_run) if e.get("component_id") == "ast_nodes"]
    dispatched = [e for e in log if e["type"] == "item_dispatched" and e["phase"] == "implement"]
    assert [e["attempt"] for e in dispatched] == [1, 2]
    summaries = [f["summary"] for f in dispatched[1]["feedback"]]
    assert f"rejected in review by bob: {note}" in summaries
    assert status(held_run)["gates"]["awaiting_review"] == [GATED]


def test_advisory_mode_counts_what_blocking_would_have_held(held_once: Path) -> None:
    # The held run sets only review: gated, so its gates are advisory (the default).
    assert [e["type"] for e in events(held_once)].count("gate_would_have_blocked") == 1
    assert status(held_once)["gates"]["would_have_blocked"] == 1
    assert "1 work call(s) would have blocked" in pact("status", str(held_once)).stdout


def test_the_retrospective_counts_what_advisory_gates_would_have_blocked(
    held_once: Path,
) -> None:
    # The held run has not ended, so the retrospective is generated from its log.
    retro = json.loads(pact("retrospective", str(held_once), "--json").stdout)
    assert [(b["item"], b["count"], b["score"]) for b in retro["would_have_blocked"]] == [
        (GATED, 1, 7)
    ]
    logged = next(e for e in events(held_once) if e["type"] == "gate_would_have_blocked")
    assert retro["would_have_blocked"][0]["reason"] == logged["reason"]
    assert "score 7" in logged["reason"]
    shown = pact("retrospective", str(held_once))
    assert shown.returncode == 0, shown.stderr
    assert "gates (advisory): 1 work call(s) would have blocked" in shown.stdout
    assert f"{GATED} x1: " in shown.stdout


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (("reject", GATED), ["--note is required"]),
        (("approve", "lexer"), ["'lexer' has no item awaiting review"]),
        (("approve", "ghost"), ["'ghost' is not a component"]),
        (("approve", "lexer/implement"), ["lexer/implement is done", GATED]),
        (("approve", "ast_nodes/deploy"), ["not a work item"]),
    ],
)
def test_bad_review_decisions_are_refused_and_write_nothing(
    held_once: Path, args: tuple[str, ...], words: list[str]
) -> None:
    before = (held_once / ".pact" / "audit.jsonl").read_bytes()
    done = pact(args[0], str(held_once), *args[1:])
    assert done.returncode == 2
    for word in words:
        assert word in done.stderr
    assert "Traceback" not in done.stderr
    assert (held_once / ".pact" / "audit.jsonl").read_bytes() == before


@pytest.mark.parametrize(
    ("yaml_text", "words"),
    [
        (
            "gates: {mode: blocking, parsr: {risk: 4}}\n",
            ["pact.yaml", "'parsr' is not a component"],
        ),
        ("gates: {parser: {risk: 5}}\n", ["pact.yaml", "gates.components.parser.risk"]),
        ("gates: sometimes\n", ["pact.yaml", "gates.mode"]),
        ("review: later\n", ["pact.yaml", "review"]),
    ],
)
def test_bad_gates_settings_are_refused_before_anything_is_written(
    tmp_path: Path, example: Path, yaml_text: str, words: list[str]
) -> None:
    project = tmp_path / "p"
    project.mkdir()
    (project / "pact.yaml").write_text(yaml_text)
    done = pact("run", str(example / "tree.json"), "--project", str(project))
    assert done.returncode == 2
    for word in words:
        assert word in done.stderr
    assert "Traceback" not in done.stderr
    assert not (project / ".pact").exists()


def test_cancel_cancels_an_item_awaiting_review_and_resume_gives_it_a_new_attempt(
    held_run: Path,
) -> None:
    res = pact("cancel", str(held_run), "--by", "carol", "--json")
    assert res.returncode == 0, res.stderr
    answer = json.loads(res.stdout)
    assert answer["outcome"] == "cancelled" and ["ast_nodes", "implement"] in answer["items"]
    shown = status(held_run)
    assert shown["status"] == "paused" and shown["gates"]["awaiting_review"] == []
    ast_nodes = next(c for c in shown["components"] if c["component_id"] == "ast_nodes")
    assert ast_nodes["phases"]["implement"] == "cancelled"
    refused = pact("approve", str(held_run), "ast_nodes")
    assert refused.returncode == 2 and "no item awaiting review" in refused.stderr
    assert not (held_run / ".pact" / "implementations" / "ast_nodes").exists()

    resumed = pact("resume", str(held_run))
    assert resumed.returncode == 3, resumed.stderr  # the new attempt waits for review again
    log = [e for e in events(held_run) if e.get("component_id") == "ast_nodes"]
    dispatched = [e for e in log if e["type"] == "item_dispatched" and e["phase"] == "implement"]
    assert [e["attempt"] for e in dispatched] == [1, 2]
    held = [e for e in log if e["type"] == "review_requested"]
    assert [e["attempt"] for e in held] == [1, 2]
    assert status(held_run)["gates"]["awaiting_review"] == [GATED]
