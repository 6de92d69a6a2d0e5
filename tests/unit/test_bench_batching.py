"""The split of one scheduler's CPU into a cost per loop step and a cost per item
(bench/batching.py): the line through its runs, and the ceiling it implies."""

from __future__ import annotations

import pytest

from bench.batching import fit_line, run_row, summary


def test_the_line_through_runs_on_an_exact_line_gives_its_intercept_and_slope() -> None:
    # cpu per step = 4 ms + 1.25 ms per result
    points = [(n, 4.0 + 1.25 * n) for n in (5.0, 7.5, 19.0, 24.0)]
    intercept, slope = fit_line(points) or (0.0, 0.0)
    assert intercept == pytest.approx(4.0)
    assert slope == pytest.approx(1.25)


def test_runs_with_one_batch_size_tell_no_line() -> None:
    assert fit_line([]) is None
    assert fit_line([(6.0, 10.0), (6.0, 12.0)]) is None


def test_a_run_is_split_per_item_and_per_step_and_the_ceiling_is_one_cpu_over_the_slope() -> None:
    # Two runs of 3,000 results: 600 steps of 5, then 125 steps of 24, each costing
    # 4 ms per step and 1.25 ms per result.
    runs = [
        run_row(16, 3000, 8.0, (600 * 4 + 3000 * 1.25) / 1000, 0.0, 600),
        run_row(64, 3000, 6.0, (125 * 4 + 3000 * 1.25) / 1000, 0.0, 125),
    ]
    assert runs[0]["results_per_step"] == 5.0 and runs[1]["results_per_step"] == 24.0
    assert runs[0]["cpu_ms_per_item"] == pytest.approx(2.05)
    assert runs[1]["cpu_ms_per_item"] == pytest.approx(1.417, abs=1e-3)
    found = summary(runs)
    assert [row["slots"] for row in found["rows"]] == [16, 64]
    assert found["fit"]["cpu_ms_per_step"] == pytest.approx(4.0, abs=1e-3)
    assert found["fit"]["cpu_ms_per_item"] == pytest.approx(1.25, abs=1e-3)
    assert found["fit"]["ceiling_items_per_s"] == pytest.approx(800.0, abs=0.1)


def test_no_ceiling_is_claimed_from_a_slope_that_is_not_positive() -> None:
    # Noise can make the larger batches cost more per step than the line allows.
    runs = [run_row(16, 100, 1.0, 0.5, 0.0, 10), run_row(64, 100, 1.0, 0.1, 0.0, 4)]
    assert summary(runs)["fit"]["cpu_ms_per_item"] < 0
    assert summary(runs)["fit"]["ceiling_items_per_s"] is None
