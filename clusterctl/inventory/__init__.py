"""The inventory: which hosts there are and how to reach them, from any supported file format.

Public entry points: ``load_inventory``, ``resolve_inventory_path``, ``select_hosts`` and
``check_inventory``; the data types live in ``clusterctl.inventory.model``. Importing this
package imports no YAML library (loaders import it when called), so the CLI starts fast.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from clusterctl.inventory.checks import check_inventory
    from clusterctl.inventory.limit import select_hosts
    from clusterctl.inventory.loader import load_inventory, resolve_inventory_path
    from clusterctl.inventory.model import Fabric, Host, Inventory, SSHOptions, StackPin

# Resolved on first use: `clusterctl --help` must not pay for the loaders.
_EXPORTS = {
    "Fabric": "model", "Host": "model", "Inventory": "model", "SSHOptions": "model", "StackPin": "model",
    "check_inventory": "checks", "select_hosts": "limit",
    "load_inventory": "loader", "resolve_inventory_path": "loader",
}

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


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(import_module(f"clusterctl.inventory.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module 'clusterctl.inventory' has no attribute {name!r}")
