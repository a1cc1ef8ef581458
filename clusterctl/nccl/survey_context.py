"""What ``nccl lint --survey FILE`` takes from a saved survey: NCCL version, fabric, NVLink."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from clusterctl.inventory.fabric import rdma_fabric_of


@dataclass(frozen=True)
class SurveyContext:
    nccl_version: str | None
    fabric: str | None
    nvlink: bool | None
    #: Versions seen when the hosts disagree (the most common one is used).
    versions_seen: tuple[str, ...] = ()
    #: For every GPU of every host, the topo -m class to its nearest NIC (PIX ... SYS).
    gpu_nic_links: tuple[str, ...] = ()


def context_from_survey(path: str | Path) -> SurveyContext:
    """The fleet's NCCL version, fabric and NVLink presence, read from a saved survey."""
    from clusterctl.saved_survey import load_saved_survey

    hosts = list(load_saved_survey(path).hosts.values())
    versions = Counter(str(h.stack["nccl"]) for h in hosts if h.stack and h.stack.get("nccl"))
    version = versions.most_common(1)[0][0] if versions else None
    layers = Counter(port.link_layer.lower() for h in hosts for nic in h.nics if nic.fabric for port in nic.ports)
    fabric = rdma_fabric_of(layers.most_common(1)[0][0]) if layers else None
    nvlink = any(len(domain) > 1 for h in hosts for domain in h.nvlink_domains) if hosts else None
    links = tuple(str(g.nic_link) for h in hosts for g in h.gpus if g.nic_link)
    return SurveyContext(version, fabric, nvlink, tuple(sorted(versions)), links)
