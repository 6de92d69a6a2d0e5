"""What the parts of the run controller share, declared once.

:class:`scheduler.run.RunController` is assembled from parts, one noun each
(dispatching, results, gates, audits, cancels, progress, leases). Each part uses
attributes the controller sets and methods other parts implement; :class:`RunPart`
declares them, so that each part reads as a whole and a type checker sees every use.

Everything here is an annotation only, except :attr:`RunPart.state` (a property):
a declaration never shadows the method that implements it, whatever the order of the
parts in the controller's bases.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import random

    from pact_workers.artifacts import ArtifactStore
    from pact_workers.models.work import Phase, ResultMessage
    from scheduler.cache import RunCache
    from scheduler.events import Event
    from scheduler.executors.base import Executor
    from scheduler.gates.dimensions import GateRecord
    from scheduler.gates.events import Stage
    from scheduler.gates.keeper import GateKeeper
    from scheduler.leases import LeaseBook
    from scheduler.project import ProjectDir
    from scheduler.settings import Settings
    from scheduler.state import RunState
    from scheduler.wavefront import WavefrontScheduler

__all__ = ["RunPart"]


class RunPart:
    """The base of every part of :class:`scheduler.run.RunController`."""

    # -- set by RunController.__init__ ----------------------------------------------
    project: ProjectDir
    executor: Executor
    store: ArtifactStore
    settings: Settings
    clock: Callable[[], float]
    rng: random.Random
    leases: LeaseBook
    scheduler: WavefrontScheduler | None
    cache: RunCache | None
    gatekeeper: GateKeeper
    lessons: list[str]
    _prior_usd: dict[Phase, float] | None

    # -- RunController's own ----------------------------------------------------------
    #: Append an event to the audit log (durable at the next commit) and fold it.
    _log: Callable[[Event], Event]
    #: Run an effect once what was logged before it is on disk.
    _after_commit: Callable[[Callable[[], None]], None]
    commit: Callable[[], None]

    @property
    def state(self) -> RunState:
        """The run's state, folded from its audit log (``RunController.state``)."""
        raise NotImplementedError

    # -- results (scheduler.outcomes.ResultHandling) ----------------------------------
    _fail: Callable[[ResultMessage], None]
    _succeed: Callable[[ResultMessage], None]
    _poison: Callable[[str, Phase], None]
    _promote: Callable[[str, Phase], None]

    # -- gates (scheduler.gates.handling.GateHandling, .auditing.AuditHandling) -------
    _gate_dispatch: Callable[[str, Phase], tuple[GateRecord, Stage]]
    _gate_inputs: Callable[[str, Phase, Stage, dict[str, str]], dict[str, str]]
    _gate_result: Callable[[ResultMessage], bool]
    _hold_for_review: Callable[..., bool]
    _hold_for_audit: Callable[..., bool]
    _teachback_verdict: Callable[..., None]
