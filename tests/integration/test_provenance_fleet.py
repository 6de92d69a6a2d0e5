"""Provenance on a real fleet (real redis-server, real ``pact worker`` processes): a code
worker is killed while it implements, the run completes on a replacement, and

- every promoted artifact's sidecar names the worker process (host/pid) that produced
  it, the replacement's for the item the killed worker had;
- ``pact timeline`` shows the lost attempt and its re-dispatch, one lane per worker
  process, and its HTML renders in headless Chromium.
"""

from __future__ import annotations

import json
import re
import socket
from pathlib import Path

import pytest

from pact_workers.models.work import Phase
from tests.acceptance.test_provenance_cli import pact, sidecars
from tests.acceptance.test_timeline_cli import rendered_dom
from tests.integration.fleet import Fleet
from tests.integration.test_fleet_faults import (
    AUTHOR_ROLES,
    CODE_ROLES,
    KILLED_LEASE_TTL_S,
    KILLED_RUN_TIMEOUT_S,
    redis_client,
    run_args,
    slow_implementations,
    wait_for_nth_start,
    wait_for_run_id,
)


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_killed_worker_shows_in_the_timeline_and_the_sidecars_name_each_host(
    redis_url: str, example: Path, tmp_path: Path
) -> None:
    project = tmp_path / "project"
    replay = slow_implementations(example, tmp_path)
    with Fleet(redis_url, tmp_path / "logs") as fleet, redis_client(redis_url) as client:
        authors = fleet.worker("authors", roles=AUTHOR_ROLES, concurrency=2)
        # One slot: the kill loses exactly the attempt it interrupts (with two, a second
        # implementation may have started by then and be lost too).
        coder = fleet.worker(
            "coder", roles=CODE_ROLES, concurrency=1, lease_ttl_s=KILLED_LEASE_TTL_S
        )
        run = fleet.pact(*run_args(example, project, redis_url, replay=replay), name="run")
        run_id = wait_for_run_id(project, fleet=fleet, run=run)
        target = wait_for_nth_start(client, run_id, (Phase.IMPLEMENT,), 1, fleet=fleet, run=run)
        coder.lose()
        replacement = fleet.worker(
            "replacement", roles=CODE_ROLES, concurrency=2, lease_ttl_s=KILLED_LEASE_TTL_S
        )
        code = fleet.wait(run, KILLED_RUN_TIMEOUT_S)
        assert code == 0, fleet.logs(authors, coder, replacement, run)

    host = socket.gethostname()
    found = sidecars(project)
    assert len(found) == 30
    lanes = {str(meta["worker"]) for meta in found.values()}
    assert all(re.fullmatch(rf"{re.escape(host)}/pid\d+", lane) for lane in lanes), lanes
    cid = target[0]
    redone = found[f".pact/implementations/{cid}/src.meta.json"]
    assert redone["attempt"] == target[2] + 1

    page = tmp_path / "run.html"
    drawn = pact("timeline", str(project), "-o", str(page))
    assert drawn.returncode == 0, drawn.stderr
    assert "1 lost or dropped" in drawn.stdout
    svg = tmp_path / "run.svg"
    assert pact("timeline", str(project), "-o", str(svg)).returncode == 0
    text = svg.read_text()
    lost_id = f"bar-{cid}-implement-{target[2]}"
    again_id = f"bar-{cid}-implement-{target[2] + 1}"
    assert f'id="{lost_id}"' in text and f'id="{again_id}"' in text
    dom = rendered_dom(page, tmp_path)
    rows = dict(re.findall(r'<tr data-bar="([^"]+)">(.*?)</tr>', dom))
    assert "<td>lost</td>" in rows[lost_id] or "<td>dropped</td>" in rows[lost_id]
    assert "<td>succeeded</td>" in rows[again_id]
    assert f"<td>{redone['worker']}</td>" in rows[again_id]
    # Lanes: the worker processes that reported, and the lost attempt's own lane.
    lanes_shown = {re.findall(r"<td>([^<]*)</td>", row)[3] for row in rows.values()}
    assert lanes <= lanes_shown
    drawn_count = re.search(r'id="drawn">(\d+) of (\d+) bars drawn<', dom)
    assert drawn_count is not None and drawn_count.group(1) == drawn_count.group(2)
    status = json.loads(pact("status", str(project), "--json").stdout)
    assert status["provenance"]["timeline"] == str(svg.resolve())
