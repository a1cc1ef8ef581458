"""This machine as a host (``survey --local``): the inventory's entry for it when there is one."""

from __future__ import annotations

import dataclasses
import socket

from clusterctl.inventory.model import Host, Inventory


def this_machine(inventory: Inventory | None, hostname: str | None = None) -> Host:
    """The local machine over the local transport; with an inventory that names it (by name,
    address or short name), that entry's expectations (fabric, stack pin) apply."""
    name = hostname or socket.gethostname()
    for host in inventory.hosts if inventory is not None else ():
        if name in (host.name, host.address) or host.name == name.split(".")[0]:
            return dataclasses.replace(host, transport="local")
    return Host(name=name, address="localhost", transport="local")
