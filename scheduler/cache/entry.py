"""One entry of the action cache: an action key and the verified result it names.

An entry is written only for a result the harness accepted and the run's log holds
as a success. It says what that result cost to produce (the money and time a hit
saves) and where it came from (the run that recorded it).
"""

from __future__ import annotations

import logging
import re
from datetime import UTC, datetime

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from pact_workers.models.testing import TestResults
from pact_workers.models.work import MAX_ATTEMPT_S, Phase, Usage

__all__ = ["DIGEST", "CacheEntry", "check_digest"]

log = logging.getLogger(__name__)

#: An action key or a bundle digest: ``sha256:`` and 64 lower-case hex digits.
DIGEST = re.compile(r"sha256:[0-9a-f]{64}")
#: The longest run id or agent name an entry may give.
MAX_LABEL_CHARS = 255


def check_digest(value: str, what: str = "digest") -> str:
    """``value`` when it is a well-formed digest.

    Raises:
        ValueError: naming ``what`` and the value.
    """
    if not isinstance(value, str) or not DIGEST.fullmatch(value):
        raise ValueError(f"malformed {what} {value!r} (expected sha256:<64 hex digits>)")
    return value


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


class CacheEntry(BaseModel):
    """A verified result, by action key."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    #: The action key (:func:`scheduler.cache.key.action_key`).
    key: str
    #: Digest of the result's bundle (its files are kept with the entry).
    output: str
    component_id: str
    phase: Phase
    files: list[str] = Field(default_factory=list)
    #: What the harness measured when it accepted the result (a contract's import
    #: probe, an implementation's contract tests); what ``cache: trust`` shows.
    test_results: TestResults | None = None
    #: What producing the result cost: the money and tokens a hit saves.
    usage: Usage = Field(default_factory=Usage)
    #: How long the attempt that produced it took.
    duration_s: float = Field(default=0.0, ge=0, le=MAX_ATTEMPT_S, allow_inf_nan=False)
    #: The run that recorded it, and the agent that wrote it (for people; a hit logs
    #: the run's id, so an entry naming a longer one is no entry).
    run_id: str = Field(default="", max_length=MAX_LABEL_CHARS)
    agent: str = Field(default="", max_length=MAX_LABEL_CHARS)
    recorded_at: str = Field(default_factory=_now)

    @field_validator("key", "output")
    @classmethod
    def _digest(cls, value: str) -> str:
        return check_digest(value)

    def to_bytes(self) -> bytes:
        return self.model_dump_json().encode()

    @classmethod
    def from_bytes(cls, raw: bytes, key: str) -> CacheEntry | None:
        """The entry in ``raw`` if it is one, and for ``key``; else None (logged): an
        entry that cannot be read is a miss, never an error of the run."""
        try:
            entry = cls.model_validate_json(raw)
        except ValidationError as exc:
            log.warning("action cache entry %s is unreadable; ignored: %s", key, exc)
            return None
        if entry.key != key:
            log.warning("action cache entry %s holds the entry of %s; ignored", key, entry.key)
            return None
        return entry
