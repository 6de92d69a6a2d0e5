"""``pact plan``: from the example's task to Pact's interview.json and tree.json."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from scheduler.audit import read_events
from scheduler.events import ItemDispatched
from scheduler.interview import AnswerSource
from scheduler.interview.recorded import InterviewRecorded
from scheduler.project import ProjectDir


def pact(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "400", "NO_COLOR": "1"}
    return subprocess.run(
        [sys.executable, "-m", "scheduler.cli", *args],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
        input=stdin if stdin is not None else "",
    )


def plan_args(example: Path, project: Path, *more: str) -> list[str]:
    return [
        "plan",
        str(example / "task.md"),
        "--project",
        str(project),
        "--replay-dir",
        str(example / "replay"),
        *more,
    ]


def test_pact_plan_approve_writes_audited_answers_and_a_tree_pact_run_completes(
    example: Path, tmp_path: Path
) -> None:
    project = tmp_path / "project"
    res = pact(*plan_args(example, project, "--approve"))
    assert res.returncode == 0, res.stdout + res.stderr
    interview = json.loads((project / "decomposition" / "interview.json").read_text())
    # Pact's own fields, unchanged in shape...
    assert set(interview) >= {"risks", "ambiguities", "questions", "assumptions"}
    assert interview["approved"] is True and len(interview["questions"]) == 6
    # ...and every answer with its source and confidence.
    log = interview["answer_log"]
    assert {a["question_id"] for a in log} == {"q_001", "q_002", "q_003", "q_004", "q_005", "q_006"}
    assert all(0.0 <= a["confidence"] <= 1.0 and a["source"] for a in log)
    by_id = {a["question_id"]: a for a in log}
    assert by_id["q_001"]["source"] == AnswerSource.AUTO_ASSUMPTION
    assert by_id["q_001"]["matched_assumption"].startswith("Division of two integers")
    assert by_id["q_006"] == {**by_id["q_006"], "source": "cli_approve", "confidence": 0.0}
    # No assumption answers two questions.
    matched = [a["matched_assumption"] for a in log if a["matched_assumption"]]
    assert len(matched) == len(set(matched))
    # Low-confidence answers are flagged.
    assert "q_006 has low confidence 0.00" in res.stdout
    tree = project / "decomposition" / "tree.json"
    assert json.loads(tree.read_text())["root_id"] == "calculator"
    res = pact("run", str(tree), "--project", str(project), "--replay-dir", str(example / "replay"))
    assert res.returncode == 0, res.stdout + res.stderr
    # The run logged the interview, and every contract author was given it.
    events, _ = read_events(project / ".pact" / "audit.jsonl")
    (recorded,) = [e for e in events if isinstance(e, InterviewRecorded)]
    assert {a.question_id for a in recorded.answers} == {f"q_00{i}" for i in range(1, 7)}
    store = ProjectDir(project).store()
    assert (
        store.get_bundle(recorded.output)["interview.json"]
        == (project / "decomposition" / "interview.json").read_bytes()
    )
    contracts = [e for e in events if isinstance(e, ItemDispatched) and e.phase.value == "contract"]
    assert len(contracts) == 10
    assert all(e.inputs["interview"] == recorded.output for e in contracts)
    # pact status flags the answers approval was unsure of.
    res = pact("status", str(project), "--json")
    status = json.loads(res.stdout)
    warnings = status["warnings"]
    # What planning cost is part of the run's spend, as the interview and decompose phases.
    assert status["spend_by_phase"]["interview"] == 0.0153
    assert status["spend_by_phase"]["decompose"] == 0.0405
    assert [w.split()[3] for w in warnings if "low confidence" in w] == ["q_005", "q_006"]


def test_pact_plan_answers_file_with_an_invalid_boolean_exits_2_naming_the_question(
    example: Path, tmp_path: Path
) -> None:
    answers = tmp_path / "answers.yaml"
    answers.write_text("q_001: maybe\nq_003: power\n")
    project = tmp_path / "project"
    res = pact(*plan_args(example, project, "--answers", str(answers)))
    assert res.returncode == 2, res.stdout + res.stderr
    assert "question q_001" in res.stderr and "'maybe'" in res.stderr
    assert "Traceback" not in res.stderr
    assert not project.exists()  # nothing written
    # A valid file: its answers, each from the file, with confidence 1.
    answers.write_text("q_001: no\nq_003: unary minus\nq_004: 50\nq_005: sqrt\nq_006: ASCII\n")
    res = pact(*plan_args(example, project, "--answers", str(answers)))
    assert res.returncode == 0, res.stdout + res.stderr
    doc = json.loads((project / "decomposition" / "interview.json").read_text())
    log = {a["question_id"]: a for a in doc["answer_log"]}
    assert "q_002" not in log  # asked only when q_001 is yes
    assert log["q_003"]["answer"] == "unary minus"
    assert all(a["source"] == "answers_file" and a["confidence"] == 1.0 for a in log.values())


def test_pact_plan_answers_file_that_is_not_yaml_exits_2_naming_the_file_and_line(
    example: Path, tmp_path: Path
) -> None:
    answers = tmp_path / "answers.yaml"
    answers.write_text("q_001: no\nq_003: [unary\nq_004: 50\n")
    project = tmp_path / "project"
    res = pact(*plan_args(example, project, "--answers", str(answers)))
    assert res.returncode == 2, res.stdout + res.stderr
    assert f"{answers}: invalid YAML at line 3 column 6: expected ','" in res.stderr
    assert "<unicode string>" not in res.stderr and "Traceback" not in res.stderr
    assert not project.exists()


def test_pact_plan_at_the_terminal_asks_again_after_an_invalid_answer(
    example: Path, tmp_path: Path
) -> None:
    project = tmp_path / "project"
    typed = "maybe\nyes\n\nsideways\npower\n2000000\n12\nsqrt and pi\nASCII only\n"
    res = pact(*plan_args(example, project), stdin=typed)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "invalid: q_001: 'maybe'" in res.stderr
    assert "invalid: q_003: 'sideways'" in res.stderr
    assert "invalid: q_004: 2000000 is above the maximum" in res.stderr
    doc = json.loads((project / "decomposition" / "interview.json").read_text())
    answers = {a["question_id"]: a["answer"] for a in doc["answer_log"]}
    # q_002 took its default (an empty line), q_004 the number typed after the refusal.
    assert answers == {
        "q_001": "yes",
        "q_002": "yes",
        "q_003": "power",
        "q_004": "12",
        "q_005": "sqrt and pi",
        "q_006": "ASCII only",
    }
    # Input that ends before every question is answered: bad input, nothing written.
    res = pact(*plan_args(example, tmp_path / "other"), stdin="yes\n")
    assert res.returncode == 2 and "input ended before question" in res.stderr
    assert not (tmp_path / "other").exists()


def test_pact_plan_sends_an_invalid_tree_back_to_the_decomposer(
    example: Path, tmp_path: Path
) -> None:
    replay = tmp_path / "replay"
    shutil.copytree(example / "replay", replay)
    tree = json.loads((replay / "plan" / "tree.json").read_text())
    tree["nodes"]["tokens"]["dependencies"] = ["lexer"]  # lexer depends on tokens: a cycle
    (replay / "plan" / "tree-1.json").write_text(json.dumps(tree))
    project = tmp_path / "project"
    res = pact(
        "plan",
        str(example / "task.md"),
        "--project",
        str(project),
        "--replay-dir",
        str(replay),
        "--approve",
    )
    assert res.returncode == 0, res.stdout + res.stderr
    assert "tree 1 was sent back" in res.stdout and "cycle" in res.stdout
    written = json.loads((project / "decomposition" / "tree.json").read_text())
    assert written["nodes"]["tokens"]["dependencies"] == []


def test_pact_demo_from_task_plans_the_example_then_runs_it(tmp_path: Path) -> None:
    project = tmp_path / "demo"
    res = pact("demo", str(project), "--from-task")
    assert res.returncode == 0, res.stdout + res.stderr
    assert "q_001: Should '/' between two integers" in res.stdout
    assert "(auto_assumption, confidence 0.62)" in res.stdout
    assert (project / "decomposition" / "interview.json").is_file()
    events, _ = read_events(project / ".pact" / "audit.jsonl")
    assert [type(e).__name__ for e in events[:2]] == ["RunStarted", "InterviewRecorded"]
    assert events[-1].type == "run_completed"


def test_pact_plan_refuses_bad_input_naming_it_and_writes_nothing(
    example: Path, tmp_path: Path
) -> None:
    project = tmp_path / "project"
    res = pact("plan", str(tmp_path / "missing.md"), "--project", str(project), "--approve")
    assert res.returncode == 2 and "missing.md" in res.stderr
    answers = tmp_path / "answers.yaml"
    answers.write_text("q_001: yes\n")
    res = pact(*plan_args(example, project, "--approve", "--answers", str(answers)))
    assert res.returncode == 2 and "not both" in res.stderr
    assert not project.exists()
    # A directory that already holds a plan is not planned over.
    assert pact(*plan_args(example, project, "--approve")).returncode == 0
    res = pact(*plan_args(example, project, "--approve"))
    assert res.returncode == 2 and "already holds a plan" in res.stderr
    assert "Traceback" not in res.stderr
