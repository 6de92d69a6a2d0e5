"""``pact cancel --broker URL RUN_ID`` during a fleet run: the driving scheduler logs
the cancel, nothing is applied after it, no task is left queued or running for the
run, and ``pact resume`` completes it."""

from __future__ import annotations

import json
import time
from pathlib import Path

import yaml

from pact_workers.app import QUEUES
from pact_workers.fleet import keys
from pact_workers.models.work import Phase
from scheduler.events import ItemDispatched, ItemFailed, ItemSucceeded
from scheduler.lifecycle.events import RunCancelled
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

#: How long an implementation's agent call takes in the cancelled run: only stopping the
#: running attempts frees the workers in time.
STUCK_S = 300.0
#: How soon after the cancel the fenced attempts must have stopped on their workers
#: (a worker sees the cancel at its lease's next renewal, every lease TTL / 3).
STOPS_WITHIN_S = 20.0


def slow_implementations(replay: Path, latency_s: float) -> None:
    script_path = replay / "replay.yaml"
    script = yaml.safe_load(script_path.read_text(encoding="utf-8"))
    script["latency_s"] = {"code_author": latency_s, "integrator": latency_s}
    script_path.write_text(yaml.safe_dump(script), encoding="utf-8")


def test_cancel_of_a_fleet_run_leaves_no_task_and_resume_completes_it(
    redis_url: str, example: Path, replay_copy: Path, tmp_path: Path
) -> None:
    # The cancelled run's implementations would wait STUCK_S; the resumed run's answer at
    # once (the example's own replay: nothing after the resume is timed).
    fast = example / "replay"
    slow_implementations(replay_copy, STUCK_S)
    project = tmp_path / "project"
    with Fleet(redis_url, tmp_path / "logs") as fleet, redis_client(redis_url) as client:
        fleet.worker("authors", roles=AUTHOR_ROLES, concurrency=2)
        fleet.worker("coders", roles=CODE_ROLES, concurrency=2)
        run = fleet.pact(*run_args(example, project, redis_url, replay=replay_copy), name="run")
        run_id = wait_for_run_id(project, fleet=fleet, run=run)
        wait_for(
            "an implementation to run",
            lambda: bool(running_attempts(client, run_id, [Phase.IMPLEMENT])),
            fleet=fleet,
            run=run,
        )
        cancel = fleet.pact(
            "cancel", run_id, "--broker", redis_url, "--by", "alice", "--json", name="cancel"
        )
        assert fleet.wait(cancel, 60) == 0, fleet.logs(cancel)
        cancelled_at = time.monotonic()
        answer = json.loads(cancel.log.read_text().strip().splitlines()[-1])
        assert answer["outcome"] == "cancelled" and answer["by"] == "alice"
        code = fleet.wait(run, RUN_TIMEOUT_S)
        assert code == 1, f"exit {code}: {fleet.logs(run)}"  # paused, as cancelled

        # No task of the run is left: nothing queued, and the fenced attempts are stopped
        # on their workers within seconds, long before their agent calls would end.
        deadline = cancelled_at + STOPS_WITHIN_S
        while running_attempts(client, run_id, list(Phase)):
            assert time.monotonic() < deadline, "a fenced attempt still runs\n" + fleet.logs()
            time.sleep(0.2)
        assert all(client.llen(queue) == 0 for queue in QUEUES.values())

        log = audit_events(project)
        at = next(i for i, e in enumerate(log) if isinstance(e, RunCancelled))
        assert log[at].by == "alice" and log[at].items  # type: ignore[union-attr]
        assert not [e for e in log[at + 1 :] if isinstance(e, ItemSucceeded | ItemDispatched)]
        fenced = {tuple(k) for k in log[at].items}  # type: ignore[union-attr]
        # Each attempt in flight at the cancel is superseded for the workers, so that one
        # taking its message late skips it.
        flying = {}
        for e in log[:at]:
            if isinstance(e, ItemDispatched):
                flying[(e.component_id, e.phase)] = e.attempt
            elif isinstance(e, ItemSucceeded | ItemFailed):
                # An attempt that ended (a scripted transient failure waiting out its
                # backoff, say) is not in flight: nothing of it runs on a worker.
                flying.pop((e.component_id, e.phase), None)
        for (cid, phase), attempt in flying.items():
            if (cid, phase) in fenced:
                current = client.get(keys.current_attempt(run_id, cid, phase.value))
                assert current == str(attempt + 1).encode(), (cid, phase, current)

        time.sleep(1.0)
        # A second cancel that no scheduler takes (none drives the run now) stays in
        # Redis; the resume voids it instead of being cancelled by it at its first turn.
        late = fleet.pact(
            *("cancel", run_id, "--broker", redis_url, "--by", "bob"),
            *("--wait-s", "0", "--json"),
            name="late-cancel",
        )
        assert fleet.wait(late, 60) == 0, fleet.logs(late)
        assert json.loads(late.log.read_text().strip().splitlines()[-1])["outcome"] == "requested"
        assert client.exists(keys.cancel_request(run_id))
        resumed = fleet.pact(
            *("resume", str(project), "--replay-dir", str(fast)),
            *("--executor", "celery", "--broker", redis_url),
            name="resume",
        )
        code = fleet.wait(resumed, RUN_TIMEOUT_S, lambda: diagnose(client, project))
        assert code == 0, fleet.logs()
        assert not client.exists(keys.cancel_request(run_id))

    log = audit_events(project)
    at = next(i for i, e in enumerate(log) if isinstance(e, RunCancelled))
    after = log[at + 1 :]
    assert [e.by for e in log if isinstance(e, RunCancelled)] == ["alice"]
    # A fenced attempt's result that came back was dropped, never applied.
    for event in after:
        if isinstance(event, ItemSucceeded) and (event.component_id, event.phase) in fenced:
            dispatched = [
                e
                for e in after
                if isinstance(e, ItemDispatched)
                and (e.component_id, e.phase, e.attempt)
                == (event.component_id, event.phase, event.attempt)
            ]
            assert dispatched, f"a fenced attempt's result was applied: {event}"
