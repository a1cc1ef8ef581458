"""Taking a node's pods off it before work, and letting pods back after: the day-2 seam for draining.

``drain_node`` is the one call the upgrade and ``remove-node`` make; it runs on the first
control plane: the node is cordoned, then quarantine's drain (``clusterctl.quarantine.drain``:
kubectl drain's rules, one eviction per gated change, PodDisruptionBudgets honoured and retried
until the timeout) takes its pods off. It returns when the node is empty and raises
``DrainFailed`` naming the pods that stayed and why. ``drain_change`` is what a plan shows.
"""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING

from clusterctl.changes import Change, ChangeFailed, Gate
from clusterctl.facts.kube import kubectl

if TYPE_CHECKING:
    from clusterctl.transport.base import Transport

DEFAULT_DRAIN_TIMEOUT_S = 300.0


class DrainFailed(Exception):
    """The node could not be emptied within the timeout (a budget, a pod that does not stop)."""


def drain_change(cp: str, node: str, timeout_s: float = DEFAULT_DRAIN_TIMEOUT_S) -> Change:
    """The plan's view of a drain: the cordon; the evictions are listed when it runs (the pods then)."""
    q = shlex.quote
    return Change.run(cp, kubectl(f"cordon {q(node)}"),
                      summary=f"cordon {node}, then evict its pods (DaemonSets left, budgets honoured, "
                              f"up to {int(timeout_s)} s)", undo=kubectl(f"uncordon {q(node)}"), timeout_s=60)


def uncordon_change(cp: str, node: str) -> Change:
    return Change.run(cp, kubectl(f"uncordon {shlex.quote(node)}"), summary=f"uncordon node {node}",
                      undo=kubectl(f"cordon {shlex.quote(node)}"))


def drain_node(transport: Transport, gate: Gate, node: str, timeout_s: float = DEFAULT_DRAIN_TIMEOUT_S) -> None:
    """Cordon and drain ``node`` from the control plane ``transport`` reaches; ``DrainFailed`` if it stays busy."""
    from clusterctl.quarantine.drain import DrainOptions
    from clusterctl.quarantine.drain import drain_node as evict_pods
    from clusterctl.quarantine.node_ops import cordon
    from clusterctl.quarantine.run import read_node

    state = read_node(transport, node)
    if state is None:
        raise DrainFailed(f"{node} is not a node of the cluster")
    try:
        gate.submit_all(transport, cordon(transport.host.name, state))
    except ChangeFailed as exc:
        raise DrainFailed(f"cannot cordon {node}: {exc}") from None
    report = evict_pods(transport, gate, node, DrainOptions(timeout_s=timeout_s, delete_emptydir_data=True))
    if report.not_evicted:
        left = "; ".join(f"{p.pod}: {p.reason}" for p in report.not_evicted[:3])
        more = f" (+{len(report.not_evicted) - 3} more)" if len(report.not_evicted) > 3 else ""
        raise DrainFailed(f"drain of {node} did not finish within {int(timeout_s)} s: {left}{more}")


def uncordon_node(transport: Transport, gate: Gate, node: str) -> None:
    gate.submit(transport, uncordon_change(transport.host.name, node))
