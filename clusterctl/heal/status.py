"""``status HOST``: one host's quarantine, where its healing stands, and every step and quarantine kept on its node."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from clusterctl.cluster_access import on_control_plane, read_node
from clusterctl.heal import history
from clusterctl.quarantine import node_ops
from clusterctl.quarantine.run import control_plane
from clusterctl.quarantine.status import QuarantinedNode, describe

if TYPE_CHECKING:
    from clusterctl.fanout import Runner
    from clusterctl.inventory.model import Host, Inventory
    from clusterctl.transport.base import Transport


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
                "heal_state": self.heal_state, "heal_history": [s.to_json() for s in self.steps],
                "quarantine_history": self.quarantined_at, "error": self.error}


def hosts_status(runner: Runner, inventory: Inventory, hosts: Sequence[Host]) -> list[HostStatus]:
    cp = control_plane(inventory)

    def task(transport: Transport) -> list[HostStatus]:
        return [HostStatus(node.name, describe(node), node.ready, node.annotations.get(history.STATE, ""),
                           history.steps_of(node), node_ops.quarantine_times(node))
                if (node := read_node(transport, host.name)) is not None
                else HostStatus(host.name, None, None, "", error=f"{host.name} is not a node of the cluster")
                for host in hosts]

    return on_control_plane(runner, cp, task, what="read the nodes", label="status")
