"""The teachback: an agent's structured restatement of its task, before the work.

Written as ``teachback.json`` (workspace-relative) when a task's stage is
``teachback``. The worker checks only its shape; the scheduler checks it against the
contract (``scheduler.gates.teachback``).
"""

from __future__ import annotations

import json

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from pact_workers.errors import VerificationError

TEACHBACK_FILE = "teachback.json"
#: Largest teachback accepted (a restatement, not the work itself).
MAX_TEACHBACK_BYTES = 256 * 1024


class TeachbackErrorCase(BaseModel):
    """An error case the agent will cover: the function that raises it, and its name."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    function: str
    name: str


class Teachback(BaseModel):
    """What the agent will produce, every function and error case it will cover, the
    components it will use, and what it assumes."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    component_id: str
    produces: str = Field(min_length=1)
    functions: list[str] = Field(default_factory=list)
    error_cases: list[TeachbackErrorCase] = Field(default_factory=list)
    #: Components of the tree the work will use (besides its own).
    uses: list[str] = Field(default_factory=list)
    assumptions: list[str] = Field(default_factory=list)


def parse_teachback(files: dict[str, bytes], component_id: str) -> Teachback:
    """The teachback among an agent's ``files``.

    Raises:
        VerificationError: it is missing, too large, not JSON, of the wrong shape or
            about another component (the message says which, for the next attempt).
    """
    data = files.get(TEACHBACK_FILE)
    if data is None:
        raise VerificationError(
            f"component {component_id!r}: no {TEACHBACK_FILE}; write the teachback first"
        )
    if len(data) > MAX_TEACHBACK_BYTES:
        raise VerificationError(
            f"component {component_id!r}: {TEACHBACK_FILE} is larger than "
            f"{MAX_TEACHBACK_BYTES} bytes; restate the task, do not do it"
        )
    try:
        teachback = Teachback.model_validate(json.loads(data.decode("utf-8")))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise VerificationError(
            f"component {component_id!r}: {TEACHBACK_FILE} is not JSON: {exc}"
        ) from exc
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or '(top)'}: {e['msg']}" for e in exc.errors()
        )
        raise VerificationError(
            f"component {component_id!r}: {TEACHBACK_FILE}: {problems}"
        ) from exc
    if teachback.component_id != component_id:
        raise VerificationError(
            f"component {component_id!r}: {TEACHBACK_FILE} restates component "
            f"{teachback.component_id!r}"
        )
    return teachback
