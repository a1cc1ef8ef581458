"""Hand-built topology matrices and host states for the survey tests (no parser involved)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from clusterctl.facts.model import (
    GPUInfo,
    NVLinkLane,
    NVLinkStatus,
    RDMADevice,
    RDMAPort,
    SoftwareStack,
    TopoDevice,
    TopoLink,
    TopoMatrix,
)
from clusterctl.inventory.model import Fabric, Host, StackPin
from clusterctl.survey.checks.host import SurveyedHost
from clusterctl.survey.collect import HostFacts
from clusterctl.survey.run import host_state


def cell(raw: str, a: str, b: str) -> TopoLink:
    if raw.startswith("NV"):
        return TopoLink(a, b, raw, "NV", int(raw[2:]))
    return TopoLink(a, b, raw, raw)


def make_matrix(
    gpus: int,
    gpu_link: Callable[[int, int], str],
    nics: Sequence[tuple[str, Callable[[int], str]]] = (),
    numa: Callable[[int], str | None] = lambda i: None,
) -> TopoMatrix:
    """``gpu_link(a, b)`` gives the cell between two GPUs, each NIC ``(name, gpu -> cell)``."""
    devices = [TopoDevice(f"GPU{i}", "gpu", i, numa_affinity=numa(i)) for i in range(gpus)]
    devices += [TopoDevice(f"NIC{j}", "nic", j, device_name=name) for j, (name, _) in enumerate(nics)]
    links: list[TopoLink] = []
    for a in devices:
        for b in devices:
            if a.label == b.label:
                raw = "X"
            elif a.kind == b.kind == "gpu":
                raw = gpu_link(min(a.index, b.index), max(a.index, b.index))
            elif a.kind == b.kind == "nic":
                raw = "SYS"
            else:
                gpu, nic = (a, b) if a.kind == "gpu" else (b, a)
                raw = nics[nic.index][1](gpu.index)
            links.append(cell(raw, a.label, b.label))
    return TopoMatrix(tuple(devices), tuple(links))


def nvswitch(
    gpus: int = 8,
    count: int = 18,
    lost: Sequence[tuple[int, int]] = (),
    fewer: dict[tuple[int, int], int] | None = None,
) -> TopoMatrix:
    """An HGX-style host: every pair NV{count}, one NIC per GPU on its PCIe switch, 2 NUMA nodes."""
    fewer = fewer or {}

    def link(a: int, b: int) -> str:
        if (a, b) in lost:
            return "SYS" if (a < gpus // 2) != (b < gpus // 2) else "NODE"
        return f"NV{fewer.get((a, b), count)}"

    nics = [
        (
            f"mlx5_{j}",
            (lambda g, j=j: "PIX" if g == j else ("NODE" if (g < gpus // 2) == (j < gpus // 2) else "SYS")),
        )
        for j in range(gpus)
    ]
    return make_matrix(gpus, link, nics, numa=lambda i: "0" if i < gpus // 2 else "1")


#: DGX-1 V100 hybrid cube mesh NVLink counts (tests/fixtures/topo/dgx1-v100-hybrid-cube-mesh.txt).
HYBRID_CUBE_MESH = {
    (0, 1): 1,
    (0, 2): 1,
    (0, 3): 2,
    (0, 4): 2,
    (1, 2): 2,
    (1, 3): 1,
    (1, 5): 2,
    (2, 3): 2,
    (2, 6): 1,
    (3, 7): 1,
    (4, 5): 1,
    (4, 6): 1,
    (4, 7): 2,
    (5, 6): 2,
    (5, 7): 1,
    (6, 7): 2,
}


def hybrid_cube_mesh() -> TopoMatrix:
    return make_matrix(
        8, lambda a, b: f"NV{HYBRID_CUBE_MESH[(a, b)]}" if (a, b) in HYBRID_CUBE_MESH else "SYS"
    )


def pcie_only(gpus: int = 4) -> TopoMatrix:
    return make_matrix(gpus, lambda a, b: "PIX" if a // 2 == b // 2 else "SYS")


def gpu_infos(n: int = 8, name: str = "NVIDIA H100 80GB HBM3", **overrides: Any) -> tuple[GPUInfo, ...]:
    base = [
        GPUInfo(
            index=i,
            name=name,
            persistence_mode=True,
            ecc_mode=True,
            ecc_errors_uncorrected=0,
            pcie_gen_current=5,
            pcie_gen_max=5,
            pcie_width_current=16,
            pcie_width_max=16,
        )
        for i in range(n)
    ]
    per_gpu: dict[int, dict[str, Any]] = overrides.pop("per_gpu", {})
    return tuple(replace(g, **per_gpu.get(g.index, {})) for g in base)


def nvlink_status(
    n: int = 8, lanes: int = 18, inactive: dict[int, Sequence[int]] | None = None
) -> tuple[NVLinkStatus, ...]:
    inactive = inactive or {}
    return tuple(
        NVLinkStatus(
            i,
            "GPU",
            None,
            tuple(
                NVLinkLane(k, None if k in inactive.get(i, ()) else 26.562, k not in inactive.get(i, ()))
                for k in range(lanes)
            ),
        )
        for i in range(n)
    )


def rdma(
    n: int = 8,
    rate: float = 400.0,
    overrides: dict[str, dict[str, Any]] | None = None,
    extra: Sequence[RDMADevice] = (),
    board: str | None = None,
) -> tuple[RDMADevice, ...]:
    overrides = overrides or {}
    devices = []
    for j in range(n):
        port = RDMAPort(1, "PORT_ACTIVE", "LinkUp", "InfiniBand", rate, "4X", "NDR")
        port = replace(port, **overrides.get(f"mlx5_{j}", {}))
        devices.append(RDMADevice(f"mlx5_{j}", "28.39.1002", None, (port,), board_id=board))
    return tuple(devices) + tuple(extra)


def stack(**overrides: Any) -> SoftwareStack:
    base = dict(
        os_name="Ubuntu",
        os_version="22.04",
        kernel="5.15.0-105-generic",
        driver="550.54.15",
        cuda="12.4",
        nccl="2.21.5",
        containerd="1.7.12",
        kubelet="1.29.3",
        kubeadm="1.29.3",
    )
    base.update(overrides)
    return SoftwareStack(**base)


def inventory_host(
    name: str,
    rack: str = "a",
    rate: float | None = 400,
    pin: StackPin | None = None,
    roles: tuple[str, ...] = ("worker",),
    fabric_type: str = "ib",
) -> Host:
    return Host(
        name=name,
        rack=rack,
        roles=roles,
        fabric=Fabric(type=fabric_type, rate_gbps=rate),  # type: ignore[arg-type]
        stack=pin or StackPin(),
        transport="mock",
    )


def healthy_state(name: str, rack: str = "a", **changes: Any) -> SurveyedHost:
    """An H100 HGX host with everything right; ``changes`` replace facts (``topology=``, ``gpus=``...)."""
    host = changes.pop("host", None) or inventory_host(name, rack)
    values: dict[str, Any] = {
        "topology": nvswitch(),
        "gpus": gpu_infos(),
        "nvlink": nvlink_status(),
        "rdma": rdma(),
        "stack": stack(),
    }
    missing = changes.pop("missing", ())
    values.update(changes)
    values = {k: v for k, v in values.items() if v is not None}
    return host_state(host, HostFacts(values=values, missing=tuple(missing)))


def fleet(*broken: SurveyedHost, healthy: int = 3) -> list[SurveyedHost]:
    return [healthy_state(f"gpu-{i}", rack="a" if i < 2 else "b") for i in range(healthy)] + list(broken)
