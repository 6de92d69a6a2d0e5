"""The benchmarks in ``bench/`` at a small size, run as a user runs them: each
completes and reports what it counts. The figures a benchmark measures (time, CPU)
are never asserted; what it counts (items, agent calls, cache hits) or computes on a
virtual clock (makespans and their bounds) is."""

from __future__ import annotations

import itertools
import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import DOCKER_GROUP, REPO

pytestmark = pytest.mark.slow


def bench(script: str, *args: str, timeout_s: float = 240.0) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, str(REPO / "bench" / script), *args, "--json"],
        capture_output=True,
        text=True,
        timeout=timeout_s,
        cwd=REPO,
    )
    assert done.returncode == 0, f"bench/{script} exited {done.returncode}:\n{done.stderr[-3000:]}"
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def test_scale_bench_runs_each_size_to_completion_and_reads_its_status(tmp_path: Path) -> None:
    found = bench("scale.py", "--sizes", "30", "100", "--dir", str(tmp_path))
    rows = found["rows"]
    assert [row["components"] for row in rows] == [30, 100]
    for row in rows:
        # Three items per component (branching 10: no component is left without a
        # parent's integrate), every one done, status read with and without drift.
        assert row["items"] == 3 * row["components"]
        assert row["completed"] and row["status_ok"], row
        assert row["baselines"] == row["components"]
        assert row["cpu_ms_per_item"] > 0 and row["core_us_per_event"] > 0
        assert row["core_slots_us_per_event"] > 0
        assert row["state_json_mb"] > 0 and row["log_mb"] > 0
    assert math.isfinite(rows[1]["growth_exponent"])
    # Its projects are removed when every size is measured.
    assert list(tmp_path.iterdir()) == []


def test_scheduling_bench_completes_both_modes_and_no_makespan_beats_its_bound() -> None:
    found = bench("scheduling.py", "--workers", "2", "8", "--seeds", "1", "--trees", "2")
    stigmergy, generated = found["stigmergy"]["runs"], found["generated"]["runs"]
    assert [(r["workers"], r["seed"]) for r in stigmergy] == [(2, 1), (8, 1)]
    assert len(generated) == 2 * 2
    for run in stigmergy + generated:
        assert run["completed"], run
        # Makespans are virtual, so these hold up to rounding: the bounds are ordered,
        # and no schedule (either mode, or the clairvoyant one) beats the tightest.
        order = ["critical_path_s", "lower_bound_s", "floor_s", "tail_bound_s"]
        for lower, upper in itertools.pairwise(order):
            assert at_most(run[lower], run[upper]), (lower, upper, run)
        for schedule in ("phased_s", "wavefront_s", "clairvoyant_s"):
            assert at_most(run["tail_bound_s"], run[schedule]), (schedule, run)


def at_most(a: float, b: float) -> bool:
    return a <= b * (1 + 1e-9)


@pytest.mark.redis
@pytest.mark.timeout(300)
def test_fleet_bench_pushes_the_items_through_the_fleet_plain_celery_and_a_real_run(
    redis_url: str,
) -> None:
    found = bench("fleet.py", "--items", "40", "--rounds", "2", "--broker", redis_url)
    assert found["items"] == 40 and found["rounds"] == 2
    for key in ("fleet_s_each", "plain_celery_s_each", "whole_path_s_each"):
        assert len(found[key]) == 2 and all(s > 0 for s in found[key]), key
    # The whole path: a flat tree of items/2 components (root included), contract
    # and test suite each, driven to the end by the run loop over the fleet.
    assert found["whole_path_items"] == 40
    assert found["whole_path_scheduler_cpu_ms_per_item"] > 0
    # One scheduler's ceiling: its CPU per item on one CPU of its own.
    ceiling = 1000 / found["whole_path_scheduler_cpu_ms_per_item"]
    assert found["whole_path_scheduler_ceiling_items_per_s"] == pytest.approx(ceiling, rel=0.01)
    # The share of its attempts sent in packs (a pack needs a result of the role first).
    assert 0 <= found["whole_path_packed_share"] < 1
    for key in ("overhead_ratio", "whole_path_ratio", "whole_path_cpu_ratio"):
        assert math.isfinite(found[key]) and found[key] > 0, key
    # Where the CPU went, per path: this process's, and the worker's (read in /proc);
    # Redis's only when the bench started its own, not with --broker.
    for path, split in found["cpu_ms_per_item"].items():
        assert set(split) == {"user", "system", "worker", "total"}, path
        assert split["worker"] > 0 and split["user"] > 0, path
        assert split["total"] >= split["worker"], path


@pytest.mark.redis
def test_redis_client_bench_times_the_client_with_hiredis_and_without(redis_url: str) -> None:
    """Both variants run (each asserts, in its own process, that hiredis is or is not
    what redis-py uses) over the same steps."""
    found = bench(
        "redis_client.py", "--steps", "5", "--batch", "4", "--rounds", "2", "--broker", redis_url
    )
    assert found["items"] == 20 and found["rounds"] == 2
    assert [len(found["each_s"][v]) for v in ("with", "without")] == [2, 2]
    for key in ("client_cpu_ms_per_item_with_hiredis", "client_cpu_ms_per_item_without"):
        assert found[key] > 0, key


@pytest.mark.redis
@pytest.mark.timeout(300)
def test_fleet_growth_bench_runs_the_whole_path_at_each_size(redis_url: str) -> None:
    found = bench("fleet_growth.py", "--sizes", "40", "20", "--rounds", "1", "--broker", redis_url)
    rows = found["rows"]
    assert [row["items"] for row in rows] == [20, 40]  # smallest first
    for row in rows:
        assert row["rounds"] == 1 and len(row["wall_s_each"]) == 1
        assert row["items_per_s"] > 0 and row["cpu_ms_per_item"] > 0
    assert "growth_exponent" not in rows[0] and math.isfinite(rows[1]["growth_exponent"])


def test_cache_bench_asks_the_agent_only_for_what_earlier_trees_did_not_cover() -> None:
    trees, components, shared = 3, 10, 0.8
    found = bench(
        "cache.py",
        *("--trees", str(trees), "--components", str(components), "--shared", str(shared)),
        *("--latency-s", "0.01"),
    )
    items = trees * components * 3
    own = components - found["shared_components"]
    assert found["shared_components"] == round(shared * components)
    # The first tree asks for every item; each later one for its own components only.
    expected_calls = components * 3 + (trees - 1) * own * 3
    results = found["results"]
    assert results["off"]["agent_calls"] == items and results["off"]["hits"] == 0
    for mode in ("verify", "trust"):
        row = results[mode]
        assert row["completed"] == trees and row["items"] == items
        assert row["agent_calls"] == expected_calls, (mode, row)
        assert row["hits"] == items - expected_calls
        # What the hits saved is what the uncached run spent on those items.
        assert row["cost_usd"] + row["saved_usd"] == pytest.approx(results["off"]["cost_usd"])


@DOCKER_GROUP
@pytest.mark.docker
@pytest.mark.timeout(300)
def test_sandbox_bench_verifies_the_same_suite_every_way(
    docker_sandbox_ready: None,
) -> None:
    found = bench("sandbox.py", "--runs", "1")
    assert set(found["median_s"]) == {"docker_sandbox", "docker_cp", "docker_bind", "local"}
    assert all(value > 0 for value in found["median_s"].values())
    assert found["sandbox_over_docker_cp"] > 0


@pytest.fixture
def docker_sandbox_ready() -> None:
    """The Docker engine and the sandbox image (built when missing), or skip/fail."""
    from tests.integration.test_sandbox_contract import docker_sandbox

    with docker_sandbox():
        pass


@pytest.mark.redis
@pytest.mark.timeout(300)
def test_batching_bench_counts_each_runs_steps_and_results_at_each_slot_count(
    redis_url: str,
) -> None:
    found = bench(
        "batching.py", "--items", "40", "--slots", "4", "16", "--rounds", "1", "--broker", redis_url
    )
    assert [row["slots"] for row in found["rows"]] == [4, 16]
    for run in found["runs"]:
        # A flat tree of 20 components, contract and test suite each: 40 results.
        assert run["results"] == 40 and run["steps"] >= 1
        assert run["cpu_ms_per_item"] > 0 and run["cpu_ms_per_step"] > 0
    # A step handles at most the results of the attempts in flight: its slots' worth.
    for run in found["runs"]:
        assert run["steps"] >= 40 / run["slots"] and run["results_per_step"] <= run["slots"]
    assert set(found["fit"]) == {"cpu_ms_per_step", "cpu_ms_per_item", "ceiling_items_per_s"}
