"""What ``nccl lint --survey FILE`` takes from a saved survey: NCCL version, fabric, NVLink."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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

    saved = load_saved_survey(path)
    hosts = list(getattr(saved, "hosts", {}).values())
    versions = Counter(v for v in (_stack_nccl(h) for h in hosts) if v)
    version = versions.most_common(1)[0][0] if versions else None
    layers: Counter[str] = Counter()
    nvlink_hosts = 0
    for host in hosts:
        for nic in getattr(host, "nics", ()):
            if not getattr(nic, "fabric", False):
                continue
            for port in getattr(nic, "ports", ()):
                layers[str(getattr(port, "link_layer", "")).lower()] += 1
        if any(len(domain) > 1 for domain in getattr(host, "nvlink_domains", ())):
            nvlink_hosts += 1
    fabric = None
    if layers:
        top = layers.most_common(1)[0][0]
        fabric = rdma_fabric_of(top)
    nvlink = (nvlink_hosts > 0) if hosts else None
    links = tuple(str(g.nic_link) for h in hosts for g in getattr(h, "gpus", ()) if getattr(g, "nic_link", None))
    return SurveyContext(version, fabric, nvlink, tuple(sorted(versions)), links)


def _stack_nccl(host: Any) -> str | None:
    stack = getattr(host, "stack", None)
    value = stack.get("nccl") if isinstance(stack, dict) else getattr(stack, "nccl", None)
    return str(value) if value else None
