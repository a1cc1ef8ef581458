"""What a bootstrap phase is: check, plan, apply through the gate, verify.

A phase never changes a host in ``check`` or ``plan``; ``plan`` returns the ``Change`` values
needed to bring the host to the wanted state, and an empty list is the first-class answer
"nothing to do". The engine passes the changes through the one ``Gate``: in record mode that is
the plan and the dry-run, in apply mode the changes are made and their backups kept. ``verify``
then confirms the result by reading facts again; when it fails the engine may undo the phase's
records through the gate (``rollback``), which a phase can extend (restart a service again).

Phases are small objects addressed by ``name`` (``clusterctl bootstrap phase NAME``,
``--skip-phases``), like kubeadm's.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, MutableMapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar

from clusterctl.changes import Change, Gate, GateRecord
from clusterctl.findings import Finding

if TYPE_CHECKING:
    from clusterctl.inventory.model import Host, Inventory
    from clusterctl.transport.base import Transport

State = TypeVar("State")


@dataclass
class PhaseContext:
    """What a phase sees of one host and of the run."""

    host: Host
    transport: Transport
    inventory: Inventory
    #: Data phases share across hosts of one run (the control-plane endpoint, a join token as a
    #: ``Secret``, the saved survey). Written by the engine and cluster phases, read by others.
    shared: MutableMapping[str, Any] = field(default_factory=dict)
    #: Options of this run (mirrors, runtime choice, paths) resolved from inventory and CLI.
    options: Mapping[str, Any] = field(default_factory=dict)


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

    def applies_to(self, ctx: PhaseContext) -> bool:
        """Whether this phase concerns the host at all (e.g. control-plane hosts only).

        Decided from ``ctx.host``, ``ctx.inventory`` and ``ctx.options`` only: the engine asks
        before it connects, so ``ctx.transport`` must not be used here. By default: ``role``.
        """
        return self.role is None or self.role in ctx.host.roles

    @abstractmethod
    def check(self, ctx: PhaseContext) -> State:
        """Read the host's current state through facts. Never changes anything."""

    @abstractmethod
    def plan(self, ctx: PhaseContext, state: State) -> list[Change]:
        """The changes that bring the host from ``state`` to the wanted state; [] when none."""

    def apply(self, ctx: PhaseContext, gate: Gate, changes: Sequence[Change]) -> list[GateRecord]:
        """Pass the planned changes through the gate, in order. Override only to interleave reads."""
        return gate.submit_all(ctx.transport, changes)

    def verify(self, ctx: PhaseContext) -> list[Finding]:
        """Findings that say the phase's result is not there; [] when it is."""
        return []

    def rollback(self, ctx: PhaseContext, gate: Gate, records: Sequence[GateRecord]) -> list[str]:
        """Undo this phase's applied changes after a failed verify; lines saying what was done."""
        return gate.undo(ctx.transport, records)

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
