"""Expired verifications on a real fleet: an implementation verified on one worker
against a dependency's files that another worker replaced meanwhile is verified
again against the current files before it is promoted (``scheduler.regression``)."""

from __future__ import annotations

from pathlib import Path

import yaml

from pact_workers.models.work import Phase
from scheduler.events import ArtifactsPromoted, ItemDispatched, ItemSucceeded
from scheduler.regression.events import RegressionChecked
from tests.integration.fleet import Fleet
from tests.integration.test_fleet_faults import (
    AUTHOR_ROLES,
    CODE_ROLES,
    RUN_TIMEOUT_S,
    audit_events,
    diagnose,
    redis_client,
    run_args,
    running_attempts,
    wait_for,
    wait_for_run_id,
)


def script_siblings(replay: Path) -> None:
    """The lexer's implementation takes a while; tokens' second implementation (a redo)
    differs from the first but keeps its interface."""
    source = (replay / "tokens" / "src" / "tokens.py").read_text(encoding="utf-8")
    second = replay / "tokens" / "attempts" / "implement-2" / "src"
    second.mkdir(parents=True)
    (second / "tokens.py").write_text(source + "\n\n# second implementation\n", "utf-8")
    script_path = replay / "replay.yaml"
    script = yaml.safe_load(script_path.read_text(encoding="utf-8"))
    script["script"].setdefault("tokens", {})["implement"] = {
        2: {"files": "tokens/attempts/implement-2"}
    }
    script["script"].setdefault("lexer", {})["implement"] = {1: {"latency_s": 12.0}}
    script_path.write_text(yaml.safe_dump(script), encoding="utf-8")


def test_a_verification_against_a_sibling_s_old_files_is_expired_reverified_then_promoted(
    redis_url: str, example: Path, replay_copy: Path, tmp_path: Path
) -> None:
    script_siblings(replay_copy)
    project = tmp_path / "project"
    with Fleet(redis_url, tmp_path / "logs") as fleet, redis_client(redis_url) as client:
        fleet.worker("authors", roles=AUTHOR_ROLES, concurrency=2)
        fleet.worker("coders", roles=CODE_ROLES, concurrency=2)
        run = fleet.pact(*run_args(example, project, redis_url, replay=replay_copy), name="run")
        run_id = wait_for_run_id(project, fleet=fleet, run=run)
        # The lexer's implementation runs on a worker, against tokens' first files...
        wait_for(
            "the lexer's implementation to run",
            lambda: (
                ("lexer", Phase.IMPLEMENT, 1) in running_attempts(client, run_id, [Phase.IMPLEMENT])
            ),
            fleet=fleet,
            run=run,
        )
        run.lose()
        # ... while tokens is implemented again on the other slot and promoted.
        resumed = fleet.pact(
            "resume",
            str(project),
            "--redo",
            "tokens",
            "--executor",
            "celery",
            "--broker",
            redis_url,
            name="resume",
        )
        code = fleet.wait(resumed, RUN_TIMEOUT_S, lambda: diagnose(client, project))
        assert code == 0, fleet.logs()

    events = audit_events(project)
    seq_of = {id(e): e.seq for e in events}
    lexer_dispatches = [
        e
        for e in events
        if isinstance(e, ItemDispatched) and (e.component_id, e.phase) == ("lexer", Phase.IMPLEMENT)
    ]
    assert [e.attempt for e in lexer_dispatches] == [1]  # verified once on the fleet
    tokens_again = next(
        e
        for e in events
        if isinstance(e, ItemSucceeded)
        and (e.component_id, e.phase, e.attempt) == ("tokens", Phase.IMPLEMENT, 2)
    )
    expired = [
        e
        for e in events
        if isinstance(e, RegressionChecked) and (e.component_id, e.status) == ("lexer", "expired")
    ]
    assert len(expired) == 1, [e for e in events if isinstance(e, RegressionChecked)]
    check = expired[0]
    assert check.reverified is True
    assert check.verified_against != check.current_closure
    assert seq_of[id(tokens_again)] < check.seq
    lexer_done = next(
        e
        for e in events
        if isinstance(e, ItemSucceeded) and (e.component_id, e.phase) == ("lexer", Phase.IMPLEMENT)
    )
    promoted = next(
        e
        for e in events
        if isinstance(e, ArtifactsPromoted)
        and (e.component_id, e.phase) == ("lexer", Phase.IMPLEMENT)
    )
    assert check.seq < lexer_done.seq < promoted.seq
    assert lexer_done.attempt == 1
