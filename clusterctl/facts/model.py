"""Typed data the fact parsers return. Pure data: no parsing or I/O here.

Every class is a frozen dataclass so it can be compared in tests and turned into JSON
with ``dataclasses.asdict``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, fields
from typing import Any, TypeVar

# --- partial reads -------------------------------------------------------------------


@dataclass(frozen=True)
class ParseWarning:
    """Something a parser could not read, and why; the rest of the result still stands.

    Parsers read what can be read: a clipped column, a row that was not pasted or a cell the
    tool itself fused with its neighbour costs the facts it held, not the whole input.
    """

    message: str
    #: 1-based line of the input it is about (``None``: the input as a whole).
    line: int | None = None

    def __str__(self) -> str:
        return f"line {self.line}: {self.message}" if self.line is not None else self.message

    def to_json(self) -> dict[str, Any]:
        return {"line": self.line, "message": self.message}


class PartialRead:
    """A parse result that reads what can be read: ``warnings`` says what could not (empty when
    the input was read whole), and the rest of the result stands."""

    warnings: tuple[ParseWarning, ...] = ()


@dataclass(frozen=True)
class ParseResult(PartialRead):
    """``PartialRead`` for the results that are dataclasses: ``warnings`` is a keyword argument, so
    a result's own fields keep their places in the constructor."""

    warnings: tuple[ParseWarning, ...] = field(default=(), kw_only=True)


_Item = TypeVar("_Item")
_Tuple = TypeVar("_Tuple", bound="PartialTuple[Any]")


class PartialTuple(PartialRead, tuple[_Item, ...]):
    """``PartialRead`` for the results that are tuples (every caller iterates them as one): the
    items, then the warnings."""

    def __new__(cls: type[_Tuple], items: Iterable[_Item] = (), warnings: tuple[ParseWarning, ...] = ()) -> _Tuple:
        made = super().__new__(cls, items)
        made.warnings = tuple(warnings)
        return made


def warnings_of(value: object) -> tuple[ParseWarning, ...]:
    """The warnings a parsed value carries (``()`` for values of parsers that have none)."""
    found = getattr(value, "warnings", ())
    return tuple(w for w in found if isinstance(w, ParseWarning)) if isinstance(found, tuple) else ()

# --- nvidia-smi topo -m -------------------------------------------------------------


@dataclass(frozen=True)
class TopoLink:
    """One cell of the matrix: how device ``a`` reaches device ``b``."""

    a: str
    b: str
    #: Raw cell text: ``X``, ``NV12``, ``PIX``, ``SYS``...
    raw: str
    #: ``X``, ``NV``, ``PIX``, ``PXB``, ``PHB``, ``NODE``, ``SYS``, ``SOC`` (old name of SYS)
    #: or ``CNS`` etc. for rarer values real outputs hold.
    kind: str
    #: Number of NVLinks for ``NV#`` cells, else 0.
    nvlinks: int = 0


@dataclass(frozen=True)
class TopoDevice:
    #: Column label as printed: ``GPU0``, ``NIC0``, ``mlx5_0`` (old drivers print HCA names directly).
    label: str
    #: ``gpu`` or ``nic``.
    kind: str
    index: int
    #: For NICs: the HCA name from the legend (``mlx5_0``) or the label itself when no legend.
    device_name: str | None = None
    #: CPU affinity as printed (``0-63,128-191``), ``None`` when the cell is empty/absent.
    cpu_affinity: str | None = None
    #: NUMA affinity as printed (``0``, ``0-1``), ``None`` when empty, ``N/A`` kept as ``None``.
    numa_affinity: str | None = None
    #: "GPU NUMA ID" column of newer drivers (``N/A`` -> ``None``).
    gpu_numa_id: str | None = None


@dataclass(frozen=True)
class TopoMatrix(ParseResult):
    """The matrix; ``warnings`` name what could not be read (clipped columns, rows not pasted, fused cells)."""

    devices: tuple[TopoDevice, ...]
    links: tuple[TopoLink, ...]

    @property
    def gpus(self) -> tuple[TopoDevice, ...]:
        return tuple(d for d in self.devices if d.kind == "gpu")

    @property
    def nics(self) -> tuple[TopoDevice, ...]:
        return tuple(d for d in self.devices if d.kind == "nic")

    def link(self, a: str, b: str) -> TopoLink | None:
        return next((link for link in self.links if link.a == a and link.b == b), None)


# --- nvidia-smi --query-gpu ----------------------------------------------------------


@dataclass(frozen=True)
class GPUInfo:
    index: int
    name: str | None = None
    uuid: str | None = None
    pci_bus_id: str | None = None
    memory_total_mib: int | None = None
    driver_version: str | None = None
    persistence_mode: bool | None = None
    ecc_mode: bool | None = None
    ecc_errors_uncorrected: int | None = None
    power_limit_w: float | None = None
    pcie_gen_current: int | None = None
    pcie_gen_max: int | None = None
    pcie_width_current: int | None = None
    pcie_width_max: int | None = None


# --- nvidia-smi nvlink -s ------------------------------------------------------------


@dataclass(frozen=True)
class NVLinkLane:
    link: int
    #: GB/s per link when active; ``None`` when inactive.
    speed_gbps: float | None
    active: bool


@dataclass(frozen=True)
class NVLinkStatus:
    gpu_index: int
    gpu_name: str | None
    uuid: str | None
    lanes: tuple[NVLinkLane, ...]
    #: nvidia-smi said "all links are inActive" instead of listing them: a PCIe GPU's usual answer, a fault on SXM.
    all_inactive: bool = False


class NVLinkStatuses(PartialTuple[NVLinkStatus]):
    """``nvidia-smi nvlink -s``'s GPUs and what the paste left out."""


# --- ibv_devinfo -v ------------------------------------------------------------------


@dataclass(frozen=True)
class RDMAPort:
    port: int
    #: ``PORT_ACTIVE``, ``PORT_DOWN``, ...
    state: str
    #: ``LinkUp``, ``Disabled``, ``Polling``, ...
    phys_state: str | None
    #: ``InfiniBand`` or ``Ethernet`` (= RoCE).
    link_layer: str
    #: Active rate in Gb/s computed from width x speed (4X x 50.0 Gbps = 200).
    rate_gbps: float | None = None
    active_width: str | None = None
    active_speed: str | None = None
    #: Index of the first RoCE v2 GID with an IPv4-mapped address, when listed.
    roce_v2_gid_index: int | None = None
    #: Every GID listed: (index, gid, type such as ``RoCE v2``).
    gids: tuple[tuple[int, str, str], ...] = ()

    def to_json(self) -> dict[str, Any]:
        """The port as survey and health write it (the GIDs as named records, like every other record)."""
        return {**{each.name: getattr(self, each.name) for each in fields(self)},
                "gids": [{"index": index, "gid": gid, "type": kind} for index, gid, kind in self.gids]}


@dataclass(frozen=True)
class RDMADevice:
    hca: str
    fw_version: str | None
    node_guid: str | None
    ports: tuple[RDMAPort, ...]
    board_id: str | None = None
    #: ``CA type`` of ``ibstat`` (``MT4123``); ``ibv_devinfo`` has ``vendor_part_id`` instead.
    ca_type: str | None = None


class RDMADevices(PartialTuple[RDMADevice]):
    """The RDMA devices of a host, what could not be read about them, and the tool the facts came
    from (``ibv_devinfo`` or ``ibstat``)."""

    source: str

    def __new__(cls, devices: Iterable[RDMADevice] = (), warnings: tuple[ParseWarning, ...] = (),
                source: str = "ibv_devinfo") -> RDMADevices:
        made = super().__new__(cls, devices, warnings)
        made.source = source
        return made


# --- software stack ------------------------------------------------------------------


@dataclass(frozen=True)
class SoftwareStack:
    """Versions on a host; ``None`` means not installed or not found."""

    os_name: str | None = None
    os_version: str | None = None
    kernel: str | None = None
    driver: str | None = None
    #: CUDA version the driver supports (``CUDA Version:`` in the nvidia-smi banner).
    cuda: str | None = None
    nccl: str | None = None
    containerd: str | None = None
    kubelet: str | None = None
    kubeadm: str | None = None
    nvidia_container_toolkit: str | None = None
    #: CUDA toolkit installed on the host (``nvcc --version`` release), when there is one.
    cuda_toolkit: str | None = None
    #: Component -> why it could not be read, for the ones that are ``None``.
    missing: dict[str, str] = field(default_factory=dict)


# --- ibdev2netdev / ip -o addr -------------------------------------------------------


@dataclass(frozen=True)
class NetDevice:
    name: str
    #: RDMA device it belongs to, if any (from ibdev2netdev).
    hca: str | None = None
    port: int | None = None
    up: bool | None = None
    ipv4: tuple[str, ...] = ()


class NetDevices(PartialTuple[NetDevice]):
    """``ibdev2netdev``'s interfaces and the lines that could not be read."""


class IPv4Addresses(PartialRead, dict[str, tuple[str, ...]]):
    """Interface -> IPv4 addresses (a dict) and the lines of ``ip -o -4 addr`` that could not be read."""
