"""What a host's ``nvidia-smi topo -m`` matrix means: NVLink domains, shape, GPU/NIC locality.

Pure functions over ``clusterctl.facts.model.TopoMatrix``: no I/O, so they run the same on
a live survey, a saved report and a pasted matrix (``clusterctl topo show``).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from functools import cached_property
from itertools import combinations, groupby

from clusterctl.facts.model import TopoLink, TopoMatrix

#: Link classes nearest first; ``SOC`` is the old name of ``SYS``. Unknown cells rank last.
LINK_RANK: dict[str, int] = {"X": 0, "NV": 1, "PIX": 2, "PXB": 3, "PHB": 4, "NODE": 5, "SYS": 6, "SOC": 6}
_UNKNOWN_RANK = 7
#: A NIC this close to a GPU shares its PCIe switch: GPUDirect RDMA runs at full speed.
NEAR_NIC_CLASSES: frozenset[str] = frozenset({"PIX", "PXB"})
#: Classes that stay inside one NUMA node (``SYS`` crosses the CPU interconnect).
SAME_NUMA_CLASSES: frozenset[str] = frozenset({"NV", "PIX", "PXB", "PHB", "NODE"})


def link_class(link: TopoLink | None) -> str:
    """The class a user reads: ``SOC`` shown as ``SYS``; a missing cell as ``?``."""
    if link is None:
        return "?"
    return "SYS" if link.kind == "SOC" else link.kind


class Shape(str, Enum):
    """How a host's GPUs are wired to each other."""

    #: Every GPU pair over NVLink with the same link count (NVSwitch systems: HGX/DGX A100/H100).
    NVSWITCH = "nvswitch"
    #: 8 GPUs, each NVLinked to 4 others (DGX-1 P100/V100 style), one NVLink domain.
    HYBRID_CUBE_MESH = "hybrid-cube-mesh"
    #: Some GPU pairs over NVLink, others not (bridged pairs, or a full mesh with a link lost).
    PARTIAL_NVLINK = "partial-nvlink"
    #: No NVLink between any two GPUs.
    PCIE_ONLY = "pcie-only"
    SINGLE_GPU = "single-gpu"
    NO_GPU = "no-gpu"


SHAPE_WORDS: dict[Shape, str] = {
    Shape.NVSWITCH: "NVSwitch full mesh",
    Shape.HYBRID_CUBE_MESH: "hybrid cube mesh",
    Shape.PARTIAL_NVLINK: "partial NVLink",
    Shape.PCIE_ONLY: "PCIe only",
    Shape.SINGLE_GPU: "single GPU",
    Shape.NO_GPU: "no GPU",
}


@dataclass(frozen=True)
class GPUPlacement:
    index: int
    label: str
    numa_node: str | None
    cpu_affinity: str | None
    #: Device names of the NICs at the best link class from this GPU (empty without NICs).
    nearest_nics: tuple[str, ...]
    #: That best class (``PIX``...), ``None`` without NICs.
    nic_link: str | None
    #: GPUs reached over NVLink, with their link counts.
    nvlink_peers: tuple[tuple[int, int], ...]

    @property
    def has_near_nic(self) -> bool:
        return self.nic_link in NEAR_NIC_CLASSES


@dataclass(frozen=True)
class NICPlacement:
    index: int
    label: str
    #: HCA name from the legend (``mlx5_0``), else the column label.
    name: str
    #: NUMA node of the GPUs it reaches without crossing the CPU interconnect, if any.
    numa_node: str | None
    #: GPUs at the NIC's best link class, when that class is better than SYS.
    nearest_gpus: tuple[int, ...]
    gpu_link: str | None


@dataclass(frozen=True)
class HostTopology:
    matrix: TopoMatrix
    shape: Shape
    gpus: tuple[GPUPlacement, ...]
    nics: tuple[NICPlacement, ...]
    #: Connected components of NV# links with at least two GPUs, as GPU indices.
    nvlink_domains: tuple[tuple[int, ...], ...]

    # The lookups below are asked for every GPU pair of every host (fleet checks, JSON
    # report), so their answers are indexed once per topology instead of scanned each time.

    def link(self, a: str, b: str) -> TopoLink | None:
        """The matrix cell from device ``a`` to device ``b`` (labels such as ``GPU0``, ``NIC3``)."""
        return self.links_by_labels.get((a, b))

    def gpu_link(self, a: int, b: int) -> TopoLink | None:
        return self.link(f"GPU{a}", f"GPU{b}")

    def nvlinks(self, a: int, b: int) -> int:
        """NVLink count between GPUs ``a`` and ``b`` (0: not NVLinked)."""
        return self._nvlink_counts.get((a, b), 0)

    def nic(self, name: str) -> NICPlacement | None:
        return next((n for n in self.nics if n.name == name), None)

    @cached_property
    def gpu_indices(self) -> tuple[int, ...]:
        return tuple(g.index for g in self.gpus)

    @cached_property
    def links_by_labels(self) -> dict[tuple[str, str], TopoLink]:
        """(row label, column label) -> matrix cell."""
        return link_index(self.matrix)

    @cached_property
    def _nvlink_counts(self) -> dict[tuple[int, int], int]:
        """(GPU, peer) -> NVLink count, for NVLinked pairs; the first placement of an index wins."""
        counts: dict[tuple[int, int], int] = {}
        seen: set[int] = set()
        for gpu in self.gpus:
            if gpu.index in seen:
                continue
            seen.add(gpu.index)
            for peer, count in gpu.nvlink_peers:
                counts.setdefault((gpu.index, peer), count)
        return counts


def link_index(matrix: TopoMatrix) -> dict[tuple[str, str], TopoLink]:
    """(row label, column label) -> cell: ``TopoMatrix.link`` in O(1), the first cell of a pair winning like it."""
    index: dict[tuple[str, str], TopoLink] = {}
    for link in matrix.links:
        index.setdefault((link.a, link.b), link)
    return index


def _gpu_index(label: str) -> int:
    return int(label[3:])


def _nvlink_graph(matrix: TopoMatrix) -> dict[int, dict[int, int]]:
    """GPU index -> {peer index: NVLink count}, symmetric (a cell on either side counts)."""
    graph: dict[int, dict[int, int]] = {_gpu_index(g.label): {} for g in matrix.gpus}
    for link in matrix.links:
        if link.kind != "NV" or not (link.a.startswith("GPU") and link.b.startswith("GPU")) or link.a == link.b:
            continue
        a, b = _gpu_index(link.a), _gpu_index(link.b)
        if a in graph and b in graph:
            graph[a][b] = max(graph[a].get(b, 0), link.nvlinks)
            graph[b][a] = max(graph[b].get(a, 0), link.nvlinks)
    return graph


def nvlink_domains(graph: dict[int, dict[int, int]]) -> tuple[tuple[int, ...], ...]:
    seen: set[int] = set()
    domains: list[tuple[int, ...]] = []
    for start in sorted(graph):
        if start in seen or not graph[start]:
            continue
        stack, component = [start], set()
        while stack:
            node = stack.pop()
            if node in component:
                continue
            component.add(node)
            stack.extend(p for p in graph[node] if p not in component)
        seen |= component
        domains.append(tuple(sorted(component)))
    return tuple(domains)


def classify_shape(graph: dict[int, dict[int, int]]) -> Shape:
    gpus = sorted(graph)
    if not gpus:
        return Shape.NO_GPU
    if len(gpus) == 1:
        return Shape.SINGLE_GPU
    pairs = list(combinations(gpus, 2))
    counts = [graph[a].get(b, 0) for a, b in pairs]
    if not any(counts):
        return Shape.PCIE_ONLY
    if all(counts) and len(set(counts)) == 1:
        return Shape.NVSWITCH
    degrees = {len(graph[g]) for g in gpus}
    if len(gpus) == 8 and degrees == {4} and len(nvlink_domains(graph)) == 1:
        return Shape.HYBRID_CUBE_MESH
    return Shape.PARTIAL_NVLINK


def nearest_of(links: list[tuple[str, TopoLink]]) -> tuple[str | None, tuple[str, ...]]:
    """Best link class among ``(name, link)`` and every name at that class."""
    if not links:
        return None, ()
    ranked = [(LINK_RANK.get(link.kind, _UNKNOWN_RANK), name, link) for name, link in links]
    best = min(rank for rank, _, _ in ranked)
    at_best = [(name, link) for rank, name, link in ranked if rank == best]
    return link_class(at_best[0][1]), tuple(name for name, _ in at_best)


def build_topology(matrix: TopoMatrix) -> HostTopology:
    """Everything the survey derives from one matrix."""
    graph = _nvlink_graph(matrix)
    links_by_labels = link_index(matrix)
    cell = links_by_labels.get
    nic_devices = matrix.nics
    gpu_devices = matrix.gpus
    gpus: list[GPUPlacement] = []
    numa_of_gpu: dict[int, str | None] = {}
    for device in gpu_devices:
        index = _gpu_index(device.label)
        numa_of_gpu[index] = device.numa_affinity
        nic_link, nearest = nearest_of([(nic.device_name or nic.label, link) for nic in nic_devices
                                   if (link := cell((device.label, nic.label))) is not None])
        gpus.append(GPUPlacement(index=index, label=device.label, numa_node=device.numa_affinity,
                                 cpu_affinity=device.cpu_affinity, nearest_nics=nearest, nic_link=nic_link,
                                 nvlink_peers=tuple(sorted(graph.get(index, {}).items()))))
    nics: list[NICPlacement] = []
    for nic in nic_devices:
        links = [(device.label, link) for device in gpu_devices
                 if (link := cell((nic.label, device.label)) or cell((device.label, nic.label))) is not None]
        gpu_link, nearest_labels = nearest_of(links)
        local = [(label, link) for label, link in links if link.kind in SAME_NUMA_CLASSES]
        numa_nodes = {numa_of_gpu.get(_gpu_index(label)) for label, _ in local} - {None}
        # SYS means "another NUMA node": such a NIC has no GPUs of its own (storage, management).
        near_gpus = () if gpu_link in (None, "SYS") else tuple(_gpu_index(label) for label in nearest_labels)
        nics.append(NICPlacement(index=nic.index, label=nic.label, name=nic.device_name or nic.label,
                                 numa_node=next(iter(numa_nodes)) if len(numa_nodes) == 1 else None,
                                 nearest_gpus=near_gpus, gpu_link=gpu_link))
    topology = HostTopology(matrix=matrix, shape=classify_shape(graph), gpus=tuple(gpus), nics=tuple(nics),
                            nvlink_domains=nvlink_domains(graph))
    # The index built above is the one ``links_by_labels`` would build again on first use.
    topology.__dict__["links_by_labels"] = links_by_labels
    return topology


def is_nvlink_clique(topology: HostTopology, group: tuple[int, ...]) -> bool:
    """True when every pair of ``group`` is directly NVLinked."""
    return all(topology.nvlinks(a, b) > 0 for a, b in combinations(group, 2))


def modal_nvlink_count(topology: HostTopology) -> tuple[int, float]:
    """Most common NV# count over GPU pairs, and the fraction of pairs that are NVLinked."""
    pairs = list(combinations(topology.gpu_indices, 2))
    counts = [topology.nvlinks(a, b) for a, b in pairs]
    linked = [c for c in counts if c]
    if not linked:
        return 0, 0.0
    modal = max(sorted(set(linked), reverse=True), key=linked.count)
    return modal, len(linked) / len(pairs)


def compress_indices(indices: tuple[int, ...] | list[int]) -> str:
    """``[0, 1, 2, 5]`` -> ``0-2,5`` for short table cells."""
    parts: list[str] = []
    # Consecutive values keep the same distance from their position in the sorted list: one run each.
    for _, run in groupby(enumerate(sorted(set(indices))), key=lambda pair: pair[1] - pair[0]):
        values = [value for _, value in run]
        parts.append(f"{values[0]}" if len(values) == 1 else f"{values[0]}-{values[-1]}")
    return ",".join(parts)
