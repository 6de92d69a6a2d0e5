"""Sandboxes: one Protocol, implementations as siblings (``local``; ``docker`` later)."""

from pact_workers.sandbox.base import Sandbox, SandboxRequest, SandboxResult, safe_relpath
from pact_workers.sandbox.local import LocalSandbox

__all__ = ["LocalSandbox", "Sandbox", "SandboxRequest", "SandboxResult", "safe_relpath"]
