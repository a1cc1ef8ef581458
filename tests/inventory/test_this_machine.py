"""``survey --local`` finds this machine's inventory entry by name, address or short name."""

from __future__ import annotations

from clusterctl.inventory.model import Fabric, Host, Inventory
from clusterctl.inventory.this_machine import this_machine


def test_the_inventory_entry_for_this_machine_keeps_its_expectations() -> None:
    entry = Host(name="gpu-a1", address="10.0.0.11", fabric=Fabric(type="ib", rate_gbps=200))
    inventory = Inventory(name="lab", hosts=(entry,))
    for seen_as in ("gpu-a1", "gpu-a1.lab.example.com", "10.0.0.11"):
        host = this_machine(inventory, seen_as)
        assert host.name == "gpu-a1" and host.transport == "local" and host.fabric.rate_gbps == 200
    stranger = this_machine(inventory, "laptop")
    assert (stranger.name, stranger.address, stranger.transport) == ("laptop", "localhost", "local")
    assert this_machine(None, "laptop").name == "laptop"
