"""``make test`` runs the suite on two processes with ``--dist loadgroup``: tests of a
group (the Docker tests, which count sandbox containers) must run on one worker. The
grouping shows in a test's id (``@<group>``); pytest-xdist 3.8 under pytest 9 drops it
silently, and this test then fails (pyproject.toml pins pytest below 9 for that)."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.xdist_group("groups-check")


def test_a_grouped_test_carries_its_group_under_loadgroup(request: pytest.FixtureRequest) -> None:
    if not getattr(request.config.option, "loadgroup", False):
        pytest.skip("not run with --dist loadgroup")
    assert request.node.nodeid.endswith("@groups-check"), request.node.nodeid
