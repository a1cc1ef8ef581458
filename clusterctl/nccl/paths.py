"""GPU-to-NIC distances as NCCL sees them: the one table lint and tune-nccl share.

``nvidia-smi topo -m`` and NCCL name distances differently. NCCL's topology code
(src/graph/paths.cc, computePaths) gives a path the type of its worst hop: PCIe switches only
is PIX (one switch) or PXB (several), a path through a CPU is PHB, a path that crosses the
CPU-to-CPU link is SYS. nvidia-smi splits the CPU case in two, PHB (one host bridge) and NODE
(several host bridges of the same CPU); NCCL calls both PHB. NCCL_NET_GDR_LEVEL is a path type:
GPUDirect RDMA is used when the GPU-NIC path is at that type or nearer (ncclTopoCheckGdr,
``distance > netGdrLevel`` turns it off), and the default is PXB.
"""

from __future__ import annotations

#: nvidia-smi topo -m class between a GPU and a NIC -> NCCL's path type for it.
TOPO_CLASS_TO_NCCL_PATH: dict[str, str] = {
    "X": "LOC",
    "PIX": "PIX",
    "PXB": "PXB",
    "PHB": "PHB",
    "NODE": "PHB",
    "SYS": "SYS",
    "SOC": "SYS",  # older nvidia-smi spelling of SYS
}
#: NCCL's path types that a GPU-NIC path can have, nearest first (their order in topoPathTypeStr).
GPU_NIC_PATHS: tuple[str, ...] = ("LOC", "PIX", "PXB", "PHB", "SYS")
#: NCCL_NET_GDR_LEVEL when unset (src/graph/paths.cc: netGdrLevel = PATH_PXB without C2C).
DEFAULT_GDR_LEVEL = "PXB"


def nccl_path(topo_class: str) -> str | None:
    """NCCL's path type for an nvidia-smi class (PIX, PXB, PHB, NODE, SYS); None when unknown."""
    return TOPO_CLASS_TO_NCCL_PATH.get(topo_class.strip().upper())


def path_rank(path: str) -> int:
    """Nearer paths rank lower; a path type NCCL does not use between a GPU and a NIC ranks last."""
    return GPU_NIC_PATHS.index(path) if path in GPU_NIC_PATHS else len(GPU_NIC_PATHS)


def uses_gdr(path: str, level: str = DEFAULT_GDR_LEVEL) -> bool:
    """Whether NCCL uses GPUDirect RDMA over a GPU-NIC path of this type at NCCL_NET_GDR_LEVEL=level."""
    return path_rank(path) <= path_rank(level)
