"""The inventory: which hosts there are and how to reach them, from any supported file format.

Public entry points: ``load_inventory``, ``resolve_inventory_path``, ``select_hosts`` and
``check_inventory``; the data types live in ``clusterctl.inventory.model``. Importing this
package imports no YAML library (loaders import it when called), so the CLI starts fast.
"""

from __future__ import annotations

from clusterctl.inventory.checks import check_inventory
from clusterctl.inventory.limit import select_hosts
from clusterctl.inventory.loader import load_inventory, resolve_inventory_path
from clusterctl.inventory.model import Fabric, Host, Inventory, SSHOptions, StackPin

__all__ = [
    "Fabric",
    "Host",
    "Inventory",
    "SSHOptions",
    "StackPin",
    "check_inventory",
    "load_inventory",
    "resolve_inventory_path",
    "select_hosts",
]
