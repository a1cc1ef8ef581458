"""What a phase of the action engine is: check, plan, apply through the gate, wait, verify.

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
``--skip-phases``), like kubeadm's. Every command that changes hosts is an ordered list of them
(bootstrap's in ``clusterctl.bootstrap.registry``, ``certs renew``'s in ``clusterctl.day2.certs``);
``clusterctl.engine.run`` runs any such list. A step that waits (a static pod back, a node Ready)
is a phase whose ``wait`` says what it waits for: the engine polls it after the phase's changes,
and a plan shows it.
"""

from __future__ import annotations

import contextlib
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar

from clusterctl.changes import Change, GateRecord, HostGate
from clusterctl.findings import Finding
from clusterctl.host_reader import HostReader, ReadOnlyHost

if TYPE_CHECKING:
    from clusterctl.inventory.model import Host, Inventory

State = TypeVar("State")


@dataclass
class PhaseContext:
    """What a phase sees of one host and of the run (a command's own context adds typed ``shared``
    and ``options``: ``clusterctl.bootstrap.phase.PhaseContext``)."""

    host: Host
    #: The host, read-only: run commands that read, read files. Changes go to the gate.
    reader: HostReader
    inventory: Inventory
    #: Data phases share across hosts of one run (the join token as a ``Secret``, the saved survey).
    shared: Any = None
    #: Options of this run (survey, paths, hosts) resolved from inventory and CLI.
    options: Any = None
    #: Bound by the engine while ``verify`` runs in an applying run: see ``temporary``.
    _gate: HostGate | None = field(default=None, repr=False, kw_only=True)

    def temporary(self, setup: Sequence[Change], cleanup: Sequence[Change]
                  ) -> contextlib.AbstractContextManager[list[GateRecord]]:
        """A change that lasts only for the ``with`` block, through the gate (verify's GPU test pod).

        ``cleanup`` runs however the block ends. It is a change the engine knows: written in the undo
        journal before ``setup`` is made (its undo is ``cleanup``), marked cleaned once cleaned up, and
        after Ctrl-C or SIGTERM cleaned up by the engine's put-back on a fresh connection once every
        host has stopped (``Gate.temporary``). Only ``verify`` of an applying run may make one: in check
        and plan it is a ``ReadOnlyHost`` error.
        """
        if self._gate is None:
            raise ReadOnlyHost(f"{self.reader.what} may not make temporary changes on {self.host.name}: only "
                               "verify of an applying run can")
        return self._gate.temporary(setup, cleanup)


Context = TypeVar("Context", bound=PhaseContext)


@dataclass(frozen=True)
class Wait:
    """What a waiting phase waits for once its changes are made: ``probe(ctx)`` is ``None`` once it is
    there, else what is seen instead (said when the time is up)."""

    summary: str
    probe: Callable[[Any], str | None]
    timeout_s: float = 300.0
    poll_s: float = 2.0


class Phase(ABC, Generic[State, Context]):
    #: Addressable name, kebab-case: ``preflight``, ``kernel``, ``containerd``...
    name: ClassVar[str]
    #: One line for ``clusterctl bootstrap --help`` and the plan.
    description: ClassVar[str]
    #: Only hosts with this inventory role run the phase (``"control-plane"``); None: every host.
    role: ClassVar[str | None] = None
    #: Hosts with this inventory role skip the phase (``join``: control planes join in their own phase).
    not_role: ClassVar[str | None] = None
    #: Read-only phases (preflight) have nothing to plan and never take the host lock for writing.
    read_only: ClassVar[bool] = False
    #: What it plans depends only on what check reads from the host, the inventory and the run's
    #: options (not on other hosts or on what earlier phases of the run made): a re-run may then
    #: skip the host when one batched replay of its reads answers as before
    #: (``clusterctl.engine.confirm``).
    confirmable: ClassVar[bool] = False
    #: Run on one host for the whole cluster (the first host ``applies_to`` accepts, in
    #: inventory order: e.g. ``kubeadm init`` on the first control-plane host), not on each.
    once_per_cluster: ClassVar[bool] = False
    #: Run on one host at a time, in inventory order (control-plane joins grow etcd one by one).
    serial: ClassVar[bool] = False
    #: Seconds a host may spend in this phase (package installs take minutes); the engine
    #: uses the larger of this and ``--timeout``.
    timeout_s: ClassVar[float] = 600.0
    #: Moves something out of place for a while (a static-pod manifest out of ``manifests/``): when
    #: the run is interrupted inside this phase, the engine undoes what the phase applied on that
    #: host before it stops (the write-ahead journal covers a harder stop).
    undo_on_interrupt: ClassVar[bool] = False
    #: Leaves nothing on the host to read back (``kubeadm upgrade node``): on ``--resume``, the progress
    #: file saying this host finished it in the run being resumed is enough, though its plan has changes.
    done_when_recorded: ClassVar[bool] = False
    #: One of several remedies tried in turn (heal's escalation chain): a host it does not cure (it fails)
    #: goes on to the next phase instead of dropping out, and one it cures (an applying run's verify
    #: passes) skips every later phase. A host that ran remedies and none cured fails the run; in a plan, one
    #: whose remedy already fails.
    remedy: ClassVar[bool] = False
    #: After a rollback, run ``verify`` again and say whether the host is back to working
    #: (containerd: it answers on the old config).
    verify_after_rollback: ClassVar[bool] = False
    #: The inventory host this phase runs on for each host it concerns, when not that host itself: a
    #: drain or a ``kubectl delete node`` from the first control plane. Its changes name that host
    #: (they run there, and undo reverts them there).
    via: str | None = None
    #: Whether a run takes the lock of ``via`` too (heal's drain leaves it: many hosts heal at once from it).
    locks_via: ClassVar[bool] = True

    def applies_to(self, ctx: Context) -> bool:
        """Whether this phase concerns the host at all (e.g. control-plane hosts only).

        Decided from ``ctx.host``, ``ctx.inventory`` and ``ctx.options`` only: the engine asks
        before it connects, so ``ctx.reader`` must not be used here. By default: ``role`` and ``not_role``.
        """
        return (self.role is None or self.role in ctx.host.roles) and (
            self.not_role is None or self.not_role not in ctx.host.roles)

    def not_needed(self, ctx: Context) -> str | None:
        """Why this phase has nothing to do on this host although it applies to its role, as the
        report says it (pyinfra's no-op reasons): ``"the host has no GPUs"``; ``None``: it runs.

        Decided like ``applies_to`` (``ctx.host``, ``ctx.inventory``, ``ctx.options``; no reads).
        """
        return None

    @abstractmethod
    def check(self, ctx: Context) -> State:
        """Read the host's current state through facts. Never changes anything."""

    def reads(self, ctx: Context) -> Sequence[tuple[str, bool]]:
        """The commands ``check`` will run, as ``(command, sudo)``, known before it runs; () by default.

        Decided from ``ctx.host``, ``ctx.inventory`` and ``ctx.options`` only (like ``applies_to``).
        Where no change is expected first, the engine reads these for every phase of the run in one
        round trip, and ``check`` (or a ``verify`` where nothing was applied) gets the answers from
        ``ctx.reader`` as if it had asked (``clusterctl.engine.read_ahead``). Name only commands
        that change nothing and whose stderr means nothing when they succeed: answers read ahead
        carry their output and exit status, not their stderr.
        """
        return ()

    def plan(self, ctx: Context, state: State) -> list[Change]:
        """The changes that bring the host from ``state`` to the wanted state; [] when none (by default: a phase
        that only checks, waits or verifies)."""
        return []

    def apply(self, ctx: Context, gate: HostGate, changes: Sequence[Change]) -> list[GateRecord]:
        """Pass the planned changes through the gate, in order. Override only to interleave reads."""
        return gate.submit_all(changes)

    def wait(self, ctx: Context) -> Wait | None:
        """What to wait for after the changes (applying runs), shown in a plan; ``None``: nothing."""
        return None

    def verify(self, ctx: Context) -> list[Finding]:
        """Findings that say the phase's result is not there; [] when it is."""
        return []

    def rollback(self, ctx: Context, records: Sequence[GateRecord]) -> list[Change]:
        """Changes to make after a failed apply or verify, once the gate has undone ``records``
        (backups restored, undo commands run): restart a service on its old config. [] by default."""
        return []

    def findings(self, ctx: Context, state: State) -> list[Finding]:
        """Problems seen in ``check`` that block or deserve a word (preflight's whole job)."""
        return []

    def fleet_findings(self, states: Mapping[str, State]) -> list[Finding]:
        """Problems only visible across hosts (two hosts with one hostname), from every host's state.

        Asked once after all hosts ran the phase. An error-level finding that names a host fails
        that host for this phase. Meant for read-only phases (preflight): by the time it is
        asked, a changing phase has already applied its changes.
        """
        return []


class ReadsNothing:
    """Mixed into a phase that reads nothing before it plans (the waiting kind: it only waits and verifies,
    and plans nothing unless it overrides ``plan``)."""

    def check(self, ctx: Any) -> Any:
        return None
