"""``status HOST``: one host's quarantine, where its healing stands, and every step and quarantine kept on its node."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING

from clusterctl.cluster_access import on_control_plane, read_node
from clusterctl.heal import history
from clusterctl.quarantine import node_ops
from clusterctl.quarantine.slurm import slurm_nodes
from clusterctl.quarantine.status import QuarantinedNode, describe, drained_in_slurm

if TYPE_CHECKING:
    from clusterctl.fanout import Runner
    from clusterctl.inventory.model import Host, Inventory


@dataclass
class HostStatus:
    host: str
    #: None: not quarantined nor cordoned.
    quarantine: QuarantinedNode | None
    ready: bool | None
    heal_state: str
    steps: list[history.StepEntry] = field(default_factory=list)
    quarantined_at: list[str] = field(default_factory=list)
    error: str | None = None

    def to_json(self) -> dict[str, object]:
        return {"host": self.host, "quarantined": self.quarantine is not None,
                "quarantine": self.quarantine.to_json() if self.quarantine else None, "ready": self.ready,
                "heal_state": self.heal_state, "heal_history": [asdict(s) for s in self.steps],
                "quarantine_history": self.quarantined_at, "error": self.error}


def hosts_status(runner: Runner, inventory: Inventory, hosts: Sequence[Host]) -> list[HostStatus]:
    """Each host's node; a host without one (none at all in a Slurm-only cluster) as Slurm shows it, as the
    list of ``status`` does."""
    cp = inventory.first_control_plane
    nodes = on_control_plane(runner, cp, lambda t: {h.name: read_node(t, h.name) for h in hosts},
                             what="read the nodes", label="status") if cp is not None else {}
    in_slurm = slurm_nodes(runner, [h for h in hosts if nodes.get(h.name) is None])
    found = []
    for host in hosts:
        if (node := nodes.get(host.name)) is not None:
            found.append(HostStatus(node.name, describe(node), node.ready, node.annotations.get(history.STATE, ""),
                                    history.steps_of(node), node_ops.quarantine_times(node)))
        elif (slurm := in_slurm.get(host.name)) is not None:
            drained = drained_in_slurm(host.name, slurm, kubernetes_node=False) if slurm.drained else None
            found.append(HostStatus(host.name, drained, None, ""))
        else:
            found.append(HostStatus(host.name, None, None, "", error=f"{host.name} is not a node of the cluster "
                                    "nor a Slurm node"))
    return found
