"""One exception tree for the whole project, rooted in :class:`PactError`.

Library errors are translated at the boundary and chained (``raise X from exc``).
A user-facing message says what was wrong, where (file, field, component) and
what to do about it.
"""

from __future__ import annotations


class PactError(Exception):
    """Base of every error raised by pact-fleet."""


class InputError(PactError):
    """Bad input from a user or the wire: a tree, a contract, settings, arguments.

    The CLI maps it to exit code 2 and writes nothing.
    """


class TreeError(InputError):
    """A decomposition tree that cannot be run."""


class SettingsError(InputError):
    """An invalid ``pact.yaml`` or option."""


class ArtifactError(InputError):
    """An artifact that is malformed, too large, or escapes its workspace."""


class CorruptArtifact(ArtifactError):
    """A stored copy of a blob whose bytes no longer hash to its name."""


class RunDirError(InputError, ValueError):
    """A project directory that is not in the state the command needs."""


class AgentError(PactError):
    """An agent could not produce its output."""


class TransientAgentError(AgentError):
    """An agent call that may succeed if tried again (network, rate limit)."""


#: How the message of every :class:`ProviderUnreachable` starts.
UNREACHABLE_PREFIX = "the provider is unreachable from this worker: "


class ProviderUnreachable(TransientAgentError):
    """No answer could be had from the model provider at all: the connection was refused
    or reset, the name did not resolve, the connection or the TLS handshake timed out.

    Transient (the network or the provider may come back), but the same on every
    component that calls that provider, so many of them at once pause the run instead of
    burning their retries. The message is ``UNREACHABLE_PREFIX``, then ``endpoint``
    (``host:port``, never credentials), then the underlying reason in parentheses.
    """

    def __init__(self, endpoint: str, reason: str) -> None:
        super().__init__(f"{UNREACHABLE_PREFIX}{endpoint} ({reason})")
        self.endpoint = endpoint
        self.reason = reason

    def __reduce__(self) -> tuple[type[ProviderUnreachable], tuple[str, str]]:
        return type(self), (self.endpoint, self.reason)


class PermanentAgentError(AgentError):
    """An agent call that will fail the same way if tried again."""


class SystemicAgentError(AgentError):
    """An agent call that fails for every component alike: bad credentials, unknown
    model. The run pauses until someone fixes the configuration."""


class SandboxError(PactError):
    """A sandbox could not run a command."""


class SandboxTimeout(SandboxError):
    """A sandboxed command ran past its hard timeout and was killed."""


class SandboxImageMissing(SandboxError):
    """The sandbox image, or the base it is built from, is not on the engine (permanent
    for that environment until someone builds it)."""


class SandboxUnavailable(SandboxError):
    """The Docker engine cannot be reached (systemic for the worker that saw it)."""


class BrokerUnavailable(PactError):
    """Redis did not answer in time (down, unreachable, or still loading its data)."""


class BrokerAuthError(BrokerUnavailable):
    """Redis refused the credentials in the URL."""


class EnvironmentSpecError(PactError, EnvironmentError):
    """The execution environment lacks the interpreter or a required tool."""


class VerificationError(PactError):
    """The harness rejected an agent's output (wrong schema, no tests, tests fail)."""


class BudgetExceededError(PactError):
    """A spend cap would be exceeded by dispatching more work."""


class CycleError(TreeError):
    """A dependency cycle; ``cycle`` lists the components in order, first repeated last."""

    def __init__(self, message: str, cycle: list[str]) -> None:
        super().__init__(message)
        self.cycle = cycle
