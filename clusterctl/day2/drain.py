"""Taking a node's pods off it before work: the day-2 seam for draining, one engine phase.

``DrainNode`` is the one drain phase: ``remove-node``, the upgrade and heal's chain run it; from a control plane
(``via``): the node is cordoned (a ``Change`` with its uncordon as undo), then quarantine's
drain (``clusterctl.quarantine.drain``: kubectl drain's rules, one eviction per gated change,
PodDisruptionBudgets honoured and retried until the timeout) takes its pods off, and the engine
waits (``Wait``) until no pod a drain takes is left on it. A drain that cannot finish fails the
phase naming the pods that stayed and why.
"""

from __future__ import annotations

from collections.abc import Sequence

from clusterctl.changes import Change, GateRecord, HostGate
from clusterctl.cluster_access import read_node
from clusterctl.engine.phase import Phase, PhaseContext, Wait
from clusterctl.facts.kube_nodes import KubeNode
from clusterctl.quarantine.drain import DEFAULT_TIMEOUT_S as DEFAULT_DRAIN_TIMEOUT_S
from clusterctl.quarantine.drain import DrainOptions, drain_or_why, eviction, pods_to_evict
from clusterctl.quarantine.node_ops import cordon
from clusterctl.transport.base import FailureKind, TransportError


class NodePhase(Phase["KubeNode | None", PhaseContext]):
    """A phase on its host's Kubernetes Node, run from the control plane ``via``: its state is the Node as
    the API shows it (None: there is no such Node)."""

    via: str

    def __init__(self, via: str) -> None:
        self.via = via

    def check(self, ctx: PhaseContext) -> KubeNode | None:
        return read_node(ctx.reader, ctx.host.name)


class DrainNode(NodePhase):
    """Cordon the node and evict its pods (quarantine's drain: kubectl drain's rules), from ``via``; then
    wait until no pod that a drain takes is left on it."""

    name = "drain"
    description = "cordon the node, evict its pods (DaemonSets left, budgets honoured)"

    def __init__(self, via: str, drain_timeout_s: float = DEFAULT_DRAIN_TIMEOUT_S, *, gone: bool = False,
                 delete_emptydir_data: bool = True) -> None:
        super().__init__(via)
        self.drain_timeout_s = drain_timeout_s
        #: The host is gone: its kubelet will not confirm any pod stopped, so nothing is waited for.
        self.gone = gone
        #: A maintenance drain's (``DrainOptions.delete_emptydir_data``); heal's is the user's.
        self.delete_emptydir_data = delete_emptydir_data

    def needed(self, ctx: PhaseContext) -> bool:
        """Whether this host is to be drained at all in this run (an upgrade leaves an up-to-date node be)."""
        return True

    def plan(self, ctx: PhaseContext, state: KubeNode | None) -> list[Change]:
        """The cordon, and the evictions the drain will make (a cordoned node's pods go too)."""
        if state is None or not self.needed(ctx):
            return []
        pods = pods_to_evict(ctx.reader, state.name, self._options())
        return cordon(self.via, state) + [eviction(self.via, pod, state.name) for pod in pods]

    def apply(self, ctx: PhaseContext, gate: HostGate, changes: Sequence[Change]) -> list[GateRecord]:
        first = len(gate.records())
        # The evictions are the drain's to make (one at a time, budgets retried): the cordon goes first.
        records = gate.submit_all([c for c in changes if not c.summary.startswith("evict pod ")])
        if not self.needed(ctx) or self.check(ctx) is None:
            return records
        report, why = drain_or_why(gate.transport, gate.gate, ctx.host.name, self._options())
        if report is None:  # this node's pods could not be read: this host's phase fails, named
            raise TransportError(FailureKind.COMMAND_FAILED, why or f"drain of {ctx.host.name} stopped")
        if report.not_evicted and not self.gone:
            # Each pod's reason says why it stayed: a rule (emptyDir data, no controller) refuses at once, a budget
            # or a slow termination after the timeout.
            left = "; ".join(f"{p.pod}: {p.reason}" for p in report.not_evicted[:3])
            raise TransportError(FailureKind.COMMAND_FAILED, f"the drain of {ctx.host.name} left "
                                 f"{len(report.not_evicted)} pod(s) on it: {left}")
        # Its cordon and evictions: what it passed through the gate of the control plane, which drains every node
        # (heal drains several at once through it: another node's evictions may stand between this one's).
        return [r for r in gate.records()[first:] if r.change.node == ctx.host.name]

    def _options(self) -> DrainOptions:
        if self.gone:
            # What the API can evict, briefly: the pods stay Terminating until the Node is deleted.
            return DrainOptions(timeout_s=min(self.drain_timeout_s, 30.0), delete_emptydir_data=True, force=True)
        return DrainOptions(timeout_s=self.drain_timeout_s, delete_emptydir_data=self.delete_emptydir_data)

    def wait(self, ctx: PhaseContext) -> Wait | None:
        if self.gone or not self.needed(ctx):
            return None

        def empty(c: PhaseContext) -> str | None:
            left = pods_to_evict(c.reader, c.host.name, self._options())
            return None if not left else f"{len(left)} pod(s) left: " + ", ".join(p.ref for p in left[:3])

        return Wait(f"no pod a drain takes is left on {ctx.host.name} (up to {int(self.drain_timeout_s)} s)", empty,
                    timeout_s=60.0)
