"""The per-host facts NCCL tuning needs, whatever survey they came from.

Tuning reads a small, flat view of a host: its RDMA ports with their GPU locality, its
network interfaces with IPv4 addresses, and the NCCL version. Building that view from a
live survey (``from_host_facts``) or a saved one (``from_saved_survey``) happens here, so
``derive`` stays a pure function of typed data.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from clusterctl.facts.model import NetDevice, RDMADevice, RDMAPort, TopoMatrix
from clusterctl.facts.netdev import merge_ipv4
from clusterctl.facts.rdma import card_of
from clusterctl.inventory.model import Host
from clusterctl.saved_survey import SavedHost, load_saved_survey
from clusterctl.survey.checks.host import CardPort
from clusterctl.survey.collect import HostFacts
from clusterctl.survey.topology import Shape, build_topology, link_class


@dataclass(frozen=True)
class NicFacts:
    """One RDMA port and where it sits relative to the GPUs."""

    hca: str
    port: int = 1
    #: ``PORT_ACTIVE``, ``PORT_DOWN``...
    state: str = "PORT_ACTIVE"
    #: ``InfiniBand`` or ``Ethernet`` (RoCE, or a plain Ethernet NIC with an RDMA driver).
    link_layer: str = "InfiniBand"
    rate_gbps: float | None = None
    roce_v2_gid_index: int | None = None
    #: Every GID: (index, gid, type such as ``RoCE v2``).
    gids: tuple[tuple[int, str, str], ...] = ()
    netdev: str | None = None
    #: GPUs at the NIC's best link class (empty when only SYS or no topology).
    nearest_gpus: tuple[int, ...] = ()
    #: Link class from each GPU to this NIC: (gpu index, ``PIX``/``PXB``/``PHB``/``NODE``/``SYS``).
    gpu_links: tuple[tuple[int, str], ...] = ()
    #: Its card model (``card_of``), whose same port on other hosts its rate is judged against.
    card: str | None = None

    @classmethod
    def of(cls, hca: str, port: RDMAPort, **where: Any) -> NicFacts:
        """One port of ``hca`` as the survey read it (live or saved), with ``where`` it sits."""
        return cls(hca, port.port, port.state or "PORT_DOWN", port.link_layer or "InfiniBand", port.rate_gbps,
                   port.roce_v2_gid_index, port.gids, **where)

    @property
    def active(self) -> bool:
        return self.state == "PORT_ACTIVE"  # the parsers' one name for it (ibstat's Active, ibv_devinfo's 4 too)

    @property
    def is_ethernet(self) -> bool:
        return self.link_layer.lower() == "ethernet"

    @property
    def card_port(self) -> CardPort:
        return f"{self.hca}/{self.port}", self.card

    @property
    def spec(self) -> str:
        """``mlx5_0:1`` as NCCL_IB_HCA writes one port."""
        return f"{self.hca}:{self.port}"


@dataclass(frozen=True)
class TuneHost:
    """What tuning knows about one host."""

    name: str
    #: The inventory address (or name) the host is reached at: bootstrap traffic should use it.
    address: str | None = None
    nccl_version: str | None = None
    gpu_indices: tuple[int, ...] = ()
    nics: tuple[NicFacts, ...] = ()
    #: Every interface with its IPv4 addresses (RDMA netdevs and the others).
    netdevs: tuple[NetDevice, ...] = ()
    #: Fabric type the inventory declares (``ib``/``roce``/``ethernet``), if any.
    fabric: str | None = None
    #: HCAs the inventory names as the host's fabric (``fabric.hcas``); empty = whatever is there.
    expected_hcas: tuple[str, ...] = ()
    #: Per-port line rate the inventory expects (``fabric.rate_gbps``), if given.
    expected_rate_gbps: float | None = None
    #: Whether the inventory declares the fabric rail-optimised (``fabric.rail_optimized``); None = unknown.
    rail_optimized: bool | None = None
    #: Every GPU pair joined by NVLink through NVSwitches (NCCL may pick NVLS/NVLSTree there).
    nvswitch: bool = False


def _gpu_links(matrix: TopoMatrix | None, nic_name: str) -> tuple[tuple[int, str], ...]:
    if matrix is None:
        return ()
    label = next((d.label for d in matrix.nics if (d.device_name or d.label) == nic_name), None)
    if label is None:
        return ()
    return tuple((gpu.index, link_class(link)) for gpu in matrix.gpus
                 if (link := matrix.link(gpu.label, label) or matrix.link(label, gpu.label)) is not None)


def nics_from_facts(
    rdma: Sequence[RDMADevice] | None,
    matrix: TopoMatrix | None,
    netdevs: Sequence[NetDevice] | None,
) -> tuple[NicFacts, ...]:
    """Join ``ibv_devinfo`` ports with the topology matrix and ``ibdev2netdev``."""
    topology = build_topology(matrix) if matrix is not None else None
    netdev_of = {(d.hca, d.port): d.name for d in netdevs or () if d.hca}
    out: list[NicFacts] = []
    for device in rdma or ():
        placement = topology.nic(device.hca) if topology is not None else None
        out += [NicFacts.of(device.hca, port, netdev=netdev_of.get((device.hca, port.port)),
                            nearest_gpus=placement.nearest_gpus if placement else (),
                            gpu_links=_gpu_links(matrix, device.hca), card=card_of(device)) for port in device.ports]
    return tuple(out)


def from_host_facts(host: Host, facts: HostFacts) -> TuneHost:
    """A live survey's facts of one host (``clusterctl.survey.collect``) as tuning input."""
    matrix = facts.topology
    netdevs = tuple(facts.netdev or ())
    if facts.ipv4 is not None:
        netdevs = merge_ipv4(netdevs, facts.ipv4)
    stack = facts.stack
    return TuneHost(
        name=host.name,
        address=host.connect_address,
        nccl_version=stack.nccl if stack else None,
        gpu_indices=tuple(d.index for d in matrix.gpus) if matrix else tuple(g.index for g in facts.gpus or ()),
        nics=nics_from_facts(facts.rdma, matrix, facts.netdev),
        netdevs=netdevs,
        nvswitch=matrix is not None and build_topology(matrix).shape == Shape.NVSWITCH,
        **_declared_fabric(host),
    )


def _declared_fabric(host: Host | None) -> dict[str, Any]:
    """What the inventory declares about the host's fabric, as ``TuneHost`` fields (none without a host)."""
    if host is None:
        return {}
    fabric = host.fabric
    return {"fabric": fabric.type, "expected_hcas": fabric.hcas, "expected_rate_gbps": fabric.rate_gbps,
            "rail_optimized": fabric.rail_optimized}


# --- saved survey (clusterctl survey --save FILE) ---------------------------------------------


def host_from_saved(saved: SavedHost, inventory_host: Host | None = None) -> TuneHost:
    """One host of a saved survey report as tuning input."""
    gpu_labels = {g.index: f"GPU{g.index}" for g in saved.gpus}
    nics: list[NicFacts] = []
    for nic in saved.nics:
        gpu_links = tuple((index, link) for index, gpu in sorted(gpu_labels.items())
                          if nic.label and (link := saved.links.get((gpu, nic.label))) is not None)
        by_port = {d.port or 1: d.name for d in nic.netdevs}
        card = card_of(RDMADevice(nic.name, None, None, (), board_id=nic.board_id, ca_type=nic.ca_type))
        nics += [NicFacts.of(nic.name, port, netdev=by_port.get(port.port), nearest_gpus=nic.nearest_gpus,
                             gpu_links=gpu_links, card=card) for port in nic.ports]
    return TuneHost(
        name=saved.name,
        address=saved.address or (inventory_host.connect_address if inventory_host else None),
        nccl_version=(saved.stack or {}).get("nccl"),
        gpu_indices=tuple(sorted(gpu_labels)),
        nics=tuple(nics),
        netdevs=merge_ipv4([d for nic in saved.nics for d in nic.netdevs], saved.interfaces),
        nvswitch=saved.shape == "nvswitch",
        **_declared_fabric(inventory_host),
    )


def from_saved_survey(path: str, inventory_hosts: Sequence[Host] = ()) -> tuple[list[TuneHost], list[str]]:
    """Reachable hosts of a saved survey (limited to ``inventory_hosts`` when given), and what was skipped."""
    saved = load_saved_survey(path)
    wanted = {h.name: h for h in inventory_hosts}
    hosts: list[TuneHost] = []
    skipped: list[str] = []
    for name, record in saved.hosts.items():
        if wanted and name not in wanted:
            continue
        if not record.reachable:
            skipped.append(f"{name}: unreachable in the saved survey, not tuned")
            continue
        hosts.append(host_from_saved(record, wanted.get(name)))
    return hosts, skipped
