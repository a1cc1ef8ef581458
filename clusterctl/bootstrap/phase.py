"""What a bootstrap phase is: check, plan, apply through the gate, verify.

A phase never changes a host in ``check``, ``plan`` or ``verify``: they get ``ctx.reader``, a
read-only view of the host (``clusterctl.host_reader.HostReader``). ``plan`` returns the
``Change`` values needed to bring the host to the wanted state, and an empty list is the
first-class answer "nothing to do". The engine passes the changes through the one ``Gate``: in
record mode that is the plan and the dry-run, in apply mode the changes are made and their
backups kept. ``verify`` then confirms the result by reading facts again (a change it needs for
a moment, a test pod, goes through ``ctx.temporary``); when it fails the engine undoes the
phase's records through the gate and then applies the phase's ``rollback`` changes (restart a
service on its old config).

Phases are small objects addressed by ``name`` (``clusterctl bootstrap phase NAME``,
``--skip-phases``), like kubeadm's.
"""

from __future__ import annotations

import contextlib
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar, Generic, TypeVar

from clusterctl.bootstrap.run_data import RunData, RunOptions
from clusterctl.changes import Change, GateRecord, HostGate
from clusterctl.findings import Finding
from clusterctl.host_reader import HostReader, ReadOnlyHost

if TYPE_CHECKING:
    from clusterctl.inventory.model import Host, Inventory

State = TypeVar("State")


@dataclass
class PhaseContext:
    """What a phase sees of one host and of the run."""

    host: Host
    #: The host, read-only: run commands that read, read files. Changes go to the gate.
    reader: HostReader
    inventory: Inventory
    #: Data phases share across hosts of one run (the join token as a ``Secret``, the saved survey).
    shared: RunData = field(default_factory=RunData)
    #: Options of this run (survey, paths, hosts) resolved from inventory and CLI.
    options: RunOptions = field(default_factory=RunOptions)
    #: Bound by the engine while ``verify`` runs in an applying run: see ``temporary``.
    _gate: HostGate | None = field(default=None, repr=False)

    def temporary(self, setup: Sequence[Change], cleanup: Sequence[Change]
                  ) -> contextlib.AbstractContextManager[list[GateRecord]]:
        """A change that lasts only for the ``with`` block, through the gate (verify's GPU test pod).

        ``cleanup`` runs however the block ends; neither is kept for undo. Only ``verify`` of an
        applying run may make one: in check and plan it is a ``ReadOnlyHost`` error.
        """
        if self._gate is None:
            raise ReadOnlyHost(f"{self.reader.what} may not make temporary changes on {self.host.name}: only "
                               "verify of an applying run can")
        return self._gate.temporary(setup, cleanup)


class Phase(ABC, Generic[State]):
    #: Addressable name, kebab-case: ``preflight``, ``kernel``, ``containerd``...
    name: ClassVar[str]
    #: One line for ``clusterctl bootstrap --help`` and the plan.
    description: ClassVar[str]
    #: Only hosts with this inventory role run the phase (``"control-plane"``); None: every host.
    role: ClassVar[str | None] = None
    #: Read-only phases (preflight) have nothing to plan and never take the host lock for writing.
    read_only: ClassVar[bool] = False
    #: Run on one host for the whole cluster (the first host ``applies_to`` accepts, in
    #: inventory order: e.g. ``kubeadm init`` on the first control-plane host), not on each.
    once_per_cluster: ClassVar[bool] = False
    #: Run on one host at a time, in inventory order (control-plane joins grow etcd one by one).
    serial: ClassVar[bool] = False
    #: Seconds a host may spend in this phase (package installs take minutes); the engine
    #: uses the larger of this and ``--timeout``.
    timeout_s: ClassVar[float] = 600.0
    #: Reads the cluster settings (``bootstrap:`` section): a run with this phase checks them up
    #: front (exit 2) instead of failing on every host.
    uses_cluster_settings: ClassVar[bool] = False
    #: After a rollback, run ``verify`` again and say whether the host is back to working
    #: (containerd: it answers on the old config).
    verify_after_rollback: ClassVar[bool] = False

    def applies_to(self, ctx: PhaseContext) -> bool:
        """Whether this phase concerns the host at all (e.g. control-plane hosts only).

        Decided from ``ctx.host``, ``ctx.inventory`` and ``ctx.options`` only: the engine asks
        before it connects, so ``ctx.reader`` must not be used here. By default: ``role``.
        """
        return self.role is None or self.role in ctx.host.roles

    @abstractmethod
    def check(self, ctx: PhaseContext) -> State:
        """Read the host's current state through facts. Never changes anything."""

    def reads(self, ctx: PhaseContext) -> Sequence[tuple[str, bool]]:
        """The commands ``check`` will run, as ``(command, sudo)``, known before it runs; () by default.

        Decided from ``ctx.host``, ``ctx.inventory`` and ``ctx.options`` only (like ``applies_to``).
        Where no change is expected first, the engine reads these for every phase of the run in one
        round trip, and ``check`` (or a ``verify`` where nothing was applied) gets the answers from
        ``ctx.reader`` as if it had asked (``clusterctl.bootstrap.read_ahead``). Name only commands
        that change nothing and whose stderr means nothing when they succeed: answers read ahead
        carry their output and exit status, not their stderr.
        """
        return ()

    @abstractmethod
    def plan(self, ctx: PhaseContext, state: State) -> list[Change]:
        """The changes that bring the host from ``state`` to the wanted state; [] when none."""

    def apply(self, ctx: PhaseContext, gate: HostGate, changes: Sequence[Change]) -> list[GateRecord]:
        """Pass the planned changes through the gate, in order. Override only to interleave reads."""
        return gate.submit_all(changes)

    def verify(self, ctx: PhaseContext) -> list[Finding]:
        """Findings that say the phase's result is not there; [] when it is."""
        return []

    def rollback(self, ctx: PhaseContext, records: Sequence[GateRecord]) -> list[Change]:
        """Changes to make after a failed apply or verify, once the gate has undone ``records``
        (backups restored, undo commands run): restart a service on its old config. [] by default."""
        return []

    def findings(self, ctx: PhaseContext, state: State) -> list[Finding]:
        """Problems seen in ``check`` that block or deserve a word (preflight's whole job)."""
        return []

    def fleet_findings(self, states: Mapping[str, State]) -> list[Finding]:
        """Problems only visible across hosts (two hosts with one hostname), from every host's state.

        Asked once after all hosts ran the phase. An error-level finding that names a host fails
        that host for this phase. Meant for read-only phases (preflight): by the time it is
        asked, a changing phase has already applied its changes.
        """
        return []


class ClusterWidePhase(Phase[State]):
    """A phase that acts on the cluster as a whole (objects through the API server, Helm releases):
    run once, from the first control-plane host."""

    role = "control-plane"
    once_per_cluster = True
    uses_cluster_settings = True
