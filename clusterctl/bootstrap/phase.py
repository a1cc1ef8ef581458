"""Bootstrap's phases: the engine's phase contract (``clusterctl.engine.phase``) with bootstrap's typed
context (``ctx.options``: ``RunOptions``, ``ctx.shared``: ``RunData``).

A bootstrap phase never changes a host in ``check``, ``plan`` or ``verify``; ``plan`` returns the
``Change`` values that bring the host to the wanted state, and the engine passes them through the
one ``Gate`` (see ``clusterctl.engine.phase`` for the whole contract).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar, Generic

from clusterctl.bootstrap.cluster.settings import ClusterSettings, cluster_settings, left_to_site
from clusterctl.bootstrap.run_data import RunData, RunOptions
from clusterctl.engine.phase import Phase as EnginePhase
from clusterctl.engine.phase import PhaseContext as EngineContext
from clusterctl.engine.phase import State


@dataclass
class PhaseContext(EngineContext):
    """What a bootstrap phase sees of one host and of the run."""

    #: Data phases share across hosts of one run (the join token as a ``Secret``, the saved survey).
    shared: RunData = field(default_factory=RunData)
    #: Options of this run (survey, paths, hosts) resolved from inventory and CLI.
    options: RunOptions = field(default_factory=RunOptions)

    def settings(self) -> ClusterSettings:
        """The run's cluster settings (the ``bootstrap:`` section), built once from the inventory."""
        with self.shared.lock:
            if self.shared.cluster_settings is None:
                self.shared.cluster_settings = cluster_settings(self.inventory)
            return self.shared.cluster_settings


#: The no-op reason of the NVIDIA phases on a host the inventory marks ``gpus: false``.
NO_GPUS = "the host has no GPUs (inventory: gpus: false)"


class Phase(EnginePhase[State, PhaseContext], Generic[State]):
    #: Reads the cluster settings (``bootstrap:`` section): a run with this phase checks them up
    #: front (exit 2) instead of failing on every host.
    uses_cluster_settings: ClassVar[bool] = False


class GpuPhase(Phase[State]):
    """A phase about the host's GPUs (the NVIDIA runtime, GPU topology labels): nothing to do on a
    host without GPUs (``Host.gpus``), which the report says."""

    def not_needed(self, ctx: PhaseContext) -> str | None:
        return None if ctx.host.gpus else NO_GPUS


class ClusterWidePhase(Phase[State]):
    """A phase that acts on the cluster as a whole (objects through the API server, Helm releases):
    run once, from the first control-plane host."""

    role = "control-plane"
    once_per_cluster = True
    uses_cluster_settings = True

    def not_needed(self, ctx: PhaseContext) -> str | None:
        """What the inventory leaves to the site (its own CNI, its own GPU add-ons): ``settings.left_to_site``."""
        return left_to_site(self.name, ctx.settings(), ctx.inventory.hosts)
