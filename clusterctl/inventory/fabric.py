"""Fabric types as the inventory names them, and the link layer each runs on: written once.

``ib`` is InfiniBand; ``roce`` is RDMA over Converged Ethernet (RDMA ports with link layer
Ethernet); ``ethernet`` is plain TCP over Ethernet, where NCCL uses its socket transport.
``ibv_devinfo`` reports a port's ``link_layer`` as ``InfiniBand`` or ``Ethernet``.
"""

from __future__ import annotations

from clusterctl.inventory.model import FabricType

INFINIBAND = "InfiniBand"
ETHERNET = "Ethernet"

LINK_LAYER_OF_FABRIC: dict[str, str] = {"ib": INFINIBAND, "roce": ETHERNET, "ethernet": ETHERNET}
#: An RDMA port's link layer, lower-cased, to its fabric (RDMA on Ethernet is RoCE).
_RDMA_FABRIC_OF_LAYER: dict[str, FabricType] = {INFINIBAND.lower(): "ib", ETHERNET.lower(): "roce"}


def link_layer_of(fabric: str | None) -> str | None:
    """The link layer ports of this fabric report (``None`` for an unknown or unset fabric)."""
    return LINK_LAYER_OF_FABRIC.get(fabric or "")


def rdma_link_layer(fabric: str | None) -> str:
    """The link layer to assume for an RDMA device nothing else describes: Ethernet on RoCE, else InfiniBand."""
    return ETHERNET if fabric == "roce" else INFINIBAND


def rdma_fabric_of(link_layer: str) -> FabricType | None:
    """The fabric an RDMA port's link layer means: ``InfiniBand`` -> ``ib``, ``Ethernet`` -> ``roce``."""
    return _RDMA_FABRIC_OF_LAYER.get(link_layer.strip().lower())


__all__ = ["ETHERNET", "INFINIBAND", "LINK_LAYER_OF_FABRIC", "link_layer_of", "rdma_fabric_of", "rdma_link_layer"]
