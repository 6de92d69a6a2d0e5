"""The auditor's verdict on an attempt the harness accepted: ``audit.json``.

The auditor reviews the output against the contract before promotion. Its verdict
can only add a rejection (with findings, which the next attempt receives); it is
never asked about an attempt the harness rejected.
"""

from __future__ import annotations

import json

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from pact_workers.errors import VerificationError

AUDIT_FILE = "audit.json"
MAX_AUDIT_BYTES = 256 * 1024


class AuditVerdict(BaseModel):
    """Approve, or reject saying what does not meet the contract."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    approved: bool = Field(description="True when the output meets the contract")
    findings: list[str] = Field(
        default_factory=list,
        description="What does not meet the contract, one specific point each (required "
        "when not approved)",
    )

    @model_validator(mode="after")
    def _rejection_says_why(self) -> AuditVerdict:
        if not self.approved and not [f for f in self.findings if f.strip()]:
            raise ValueError("a rejection needs at least one finding")
        return self


def parse_audit(files: dict[str, bytes], component_id: str) -> AuditVerdict:
    """The verdict among the auditor's ``files``.

    Raises:
        VerificationError: missing, too large, not JSON or of the wrong shape.
    """
    data = files.get(AUDIT_FILE)
    if data is None:
        raise VerificationError(f"component {component_id!r}: the auditor wrote no {AUDIT_FILE}")
    if len(data) > MAX_AUDIT_BYTES:
        raise VerificationError(
            f"component {component_id!r}: {AUDIT_FILE} is larger than {MAX_AUDIT_BYTES} bytes"
        )
    try:
        return AuditVerdict.model_validate(json.loads(data.decode("utf-8")))
    except (UnicodeDecodeError, json.JSONDecodeError, ValidationError) as exc:
        raise VerificationError(f"component {component_id!r}: {AUDIT_FILE}: {exc}") from exc
