"""Small inventories and settings for the cluster-phase tests."""

from __future__ import annotations

from pathlib import Path

from clusterctl.bootstrap.cluster.settings import ClusterSettings, settings_from_mapping
from clusterctl.inventory.model import Host, Inventory

FIXTURES = Path(__file__).parent / "fixtures"


def make_inventory(control_planes: int = 1, workers: int = 2, *, cp_is_worker: bool = False) -> Inventory:
    hosts: list[Host] = []
    for i in range(control_planes):
        roles = ("control-plane", "worker") if cp_is_worker else ("control-plane",)
        hosts.append(Host(f"cp{i + 1}", address=f"10.0.0.{i + 1}", roles=roles, rack="a",
                          vars=(("zone", "zone-1"),)))
    for i in range(workers):
        hosts.append(Host(f"gpu{i + 1}", address=f"10.0.1.{i + 1}", roles=("worker",), rack="b" if i % 2 else "a"))
    return Inventory("test", tuple(hosts))


def make_settings(**data: object) -> ClusterSettings:
    return settings_from_mapping(data, kubernetes_pin="1.36.2", first_control_plane="10.0.0.1")
