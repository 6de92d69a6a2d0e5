"""Fixtures of the unit tests: an in-memory Redis (fakeredis: unit tests only; the
integration tests use a real redis-server)."""

from __future__ import annotations

from collections.abc import Iterator

import fakeredis
import pytest


@pytest.fixture
def fake() -> Iterator[fakeredis.FakeRedis]:
    """A fresh fakeredis client, closed after the test."""
    client = fakeredis.FakeRedis()
    yield client
    client.close()
