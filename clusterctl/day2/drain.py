"""Taking a node's pods off it before work: the day-2 seam for draining, one engine phase.

``DrainNode`` is the one drain phase: ``remove-node``, the upgrade and heal's chain run it; from a control plane
(``via``): the node is cordoned (a ``Change`` with its uncordon as undo), then quarantine's
drain (``clusterctl.quarantine.drain``: kubectl drain's rules, one eviction per gated change,
PodDisruptionBudgets honoured and retried until the timeout) takes its pods off, and the engine
waits (``Wait``) until no pod a drain takes is left on it. Pods the rules refuse fail the phase before
its cordon, in a plan too; a drain that cannot finish fails it naming the pods that stayed and why.
"""

from __future__ import annotations

from collections.abc import Sequence

from clusterctl.changes import MAKES_EVICTION, Change, GateRecord, HostGate
from clusterctl.cluster_access import read_node
from clusterctl.engine.phase import Phase, PhaseContext, Wait
from clusterctl.facts.kube_nodes import KubeNode, Pod
from clusterctl.findings import Finding, Severity
from clusterctl.quarantine.drain import DEFAULT_TIMEOUT_S as DEFAULT_DRAIN_TIMEOUT_S
from clusterctl.quarantine.drain import DrainOptions, PodLeft, drain_node, eviction, pods_to_evict
from clusterctl.quarantine.node_ops import cordon
from clusterctl.transport.base import FailureKind, TransportError
from clusterctl.wording import first_few

#: What the drain phase reads of its node: the Node, the pods a drain takes off it now and those it refuses.
Drainable = tuple[KubeNode, list[Pod], list[PodLeft]]


class DrainNode(Phase["Drainable | None", PhaseContext]):
    """Cordon the node and evict its pods (quarantine's drain: kubectl drain's rules), from ``via``; then
    wait until no pod that a drain takes is left on it."""

    name = "drain"
    description = "cordon the node, evict its pods (DaemonSets left, budgets honoured)"
    via: str

    def __init__(self, via: str, drain_timeout_s: float = DEFAULT_DRAIN_TIMEOUT_S, *, gone: bool = False,
                 delete_emptydir_data: bool = True) -> None:
        self.via = via
        #: The host is gone: its kubelet will not confirm any pod stopped, so nothing is waited for.
        self.gone = gone
        # Gone: what the API can evict, briefly (the pods stay Terminating until the Node is deleted). Else emptyDir
        # data goes in a maintenance drain (``DrainOptions.delete_emptydir_data``), as the user says in heal's.
        self.options = DrainOptions(timeout_s=min(drain_timeout_s, 30.0), delete_emptydir_data=True, force=True) \
            if gone else DrainOptions(timeout_s=drain_timeout_s, delete_emptydir_data=delete_emptydir_data)

    def needed(self, ctx: PhaseContext) -> bool:
        """Whether this host is to be drained at all in this run (an upgrade leaves an up-to-date node be)."""
        return True

    def check(self, ctx: PhaseContext) -> Drainable | None:
        """None where there is no such Node or nothing to drain in this run."""
        node = read_node(ctx.reader, ctx.host.name)
        if node is None or not self.needed(ctx):
            return None
        return node, *pods_to_evict(ctx.reader, node.name, self.options)

    def findings(self, ctx: PhaseContext, state: Drainable | None) -> list[Finding]:
        """The pods the drain refuses, by reason as kubectl drain's, the first few named (every one in the evidence,
        for -o json): the host fails before its cordon, plan and run."""
        refused: dict[str, list[str]] = {}
        for left in state[2] if state else []:
            refused.setdefault(left.reason, []).append(left.pod)
        return [Finding(Severity.ERROR, "DRAIN_REFUSED", f"the drain cannot evict {first_few(pods, 3, ', ')}: {reason}",
                        host=ctx.host.name, evidence={"pods": pods}) for reason, pods in refused.items()]

    def plan(self, ctx: PhaseContext, state: Drainable | None) -> list[Change]:
        """The cordon, and the evictions the drain will make (a cordoned node's pods go too)."""
        if state is None:
            return []
        node, pods, _ = state
        return cordon(self.via, node) + [eviction(self.via, pod, node.name) for pod in pods]

    def apply(self, ctx: PhaseContext, gate: HostGate, changes: Sequence[Change]) -> list[GateRecord]:
        if not changes:
            return []
        first = len(gate.records())
        # The evictions are the drain's to make (one at a time, budgets retried): the cordon goes first.
        gate.submit_all([c for c in changes if MAKES_EVICTION not in c.makes])
        report = drain_node(gate.transport, gate.gate, ctx.host.name, self.options)
        if report.not_evicted and not self.gone:
            # A budget, or a slow termination, held a pod until the timeout (a rule refuses in ``findings``).
            left = "; ".join(f"{p.pod}: {p.reason}" for p in report.not_evicted[:3])
            raise TransportError(FailureKind.COMMAND_FAILED, f"the drain of {ctx.host.name} left "
                                 f"{len(report.not_evicted)} pod(s) on it: {left}")
        # Its cordon and evictions: what it passed through the gate of the control plane, which drains every node
        # (heal drains several at once through it: another node's evictions may stand between this one's).
        return [r for r in gate.records()[first:] if r.change.node == ctx.host.name]

    def wait(self, ctx: PhaseContext) -> Wait | None:
        if self.gone or not self.needed(ctx):
            return None

        def empty(c: PhaseContext) -> str | None:
            left, _ = pods_to_evict(c.reader, c.host.name, self.options)
            return None if not left else f"{len(left)} pod(s) left: " + ", ".join(p.ref for p in left[:3])

        return Wait(f"no pod a drain takes is left on {ctx.host.name} (up to {int(self.options.timeout_s)} s)", empty,
                    timeout_s=60.0)
