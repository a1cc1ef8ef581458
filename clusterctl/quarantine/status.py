"""Which hosts are quarantined, since when, by whom, why, and what their release needs.

Read from the cluster itself (the nodes' taint and clusterctl's annotations, through the first
control-plane host), so it is the same from any control machine and after any number of runs.
A node cordoned or tainted by someone else (no clusterctl annotation) is listed too, marked so.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from clusterctl.cluster_access import cluster_nodes
from clusterctl.facts.kube_nodes import KubeNode
from clusterctl.facts.slurm import REASON_PREFIX, SlurmNode, update_command
from clusterctl.quarantine import node_ops
from clusterctl.quarantine.slurm import slurm_nodes

if TYPE_CHECKING:
    from clusterctl.fanout import Runner
    from clusterctl.inventory.model import Inventory

RELEASE_NEEDS = "health (level 1) and bench nccl on the host pass: clusterctl release {host}"


@dataclass(frozen=True)
class QuarantinedNode:
    host: str
    since: str
    by: str
    reason: str
    codes: tuple[str, ...]
    cordoned: bool
    taint: str
    #: False: cordoned or tainted, but not by clusterctl (no annotation).
    by_clusterctl: bool
    release_needs: str
    #: Slurm's side, beside Kubernetes': the node's state (``IDLE+DRAIN``), "" where no slurmd runs.
    slurm_state: str = ""
    slurm_reason: str = ""
    #: False for a host Slurm alone knows (no Kubernetes node of that name), not for a node drained in Slurm alone.
    kubernetes_node: bool = True

    def to_json(self) -> dict[str, object]:
        return {"host": self.host, "since": self.since, "by": self.by, "reason": self.reason,
                "codes": list(self.codes), "cordoned": self.cordoned, "taint": self.taint,
                "by_clusterctl": self.by_clusterctl, "release_needs": self.release_needs,
                "kubernetes_node": self.kubernetes_node, "slurm": {"state": self.slurm_state,
                                                                   "reason": self.slurm_reason} if self.slurm_state
                else None}


def describe(node: KubeNode) -> QuarantinedNode | None:
    if not node_ops.out_of_service(node):
        return None
    ours = node_ops.is_quarantined(node)
    taint = node.taint(node_ops.TAINT_KEY)
    notes = node.annotations
    reason, codes = node_ops.reason_and_codes(node)
    needs = RELEASE_NEEDS.format(host=node.name) if ours else \
        f"cordoned outside clusterctl: kubectl uncordon {node.name} when its owner agrees"
    return QuarantinedNode(node.name, notes.get(node_ops.annotation("at"), ""),
                           notes.get(node_ops.annotation("by"), ""), reason, codes, node.unschedulable,
                           taint.spec() if taint else "", ours, needs)


def quarantined_nodes(runner: Runner, inventory: Inventory) -> list[QuarantinedNode]:
    """The cluster's quarantined (or otherwise cordoned) nodes, in the API server's order, each with its Slurm
    state beside; then the hosts drained in Slurm alone (a Slurm-only host, or a drain nobody cordoned)."""
    cp = inventory.first_control_plane  # None: a Slurm-only cluster
    nodes = cluster_nodes(runner, cp) if cp is not None else {}
    rows = [q for q in (describe(n) for n in nodes.values()) if q is not None]
    known = {r.host for r in rows}
    in_slurm = slurm_nodes(runner, inventory.hosts)
    out = []
    for row in rows:
        node = in_slurm.get(row.host)
        out.append(replace(row, slurm_state=node.state, slurm_reason=node.reason) if node else row)
    for host in inventory.hosts:
        node = in_slurm.get(host.name)
        if host.name not in known and node is not None and node.drained:
            out.append(drained_in_slurm(host.name, node, kubernetes_node=host.name in nodes))
    return out


def drained_in_slurm(host: str, node: SlurmNode, *, kubernetes_node: bool) -> QuarantinedNode:
    """A host drained in Slurm alone (a Slurm-only host, or a drain nobody cordoned), by clusterctl or not."""
    ours = node.drained_by_clusterctl
    needs = RELEASE_NEEDS.format(host=host) if ours else \
        f"drained in Slurm outside clusterctl: {update_command(node.name, 'resume')} when its owner agrees"
    return QuarantinedNode(host, node.reason_time or "", node.reason_user or "",
                           node.reason.removeprefix(REASON_PREFIX), (), False, "", ours, needs, node.state,
                           node.reason, kubernetes_node)
