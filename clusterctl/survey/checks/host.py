"""One surveyed host as the checks see it, and how hosts are grouped to compare them."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Hashable, Iterable, Iterator
from dataclasses import dataclass
from functools import cached_property
from typing import Any, TypeVar, cast

from clusterctl.facts.model import GPUInfo, NVLinkStatus, RDMADevice, RDMAPort
from clusterctl.facts.rdma import card_of, link_rate, runs_slow
from clusterctl.inventory.fabric import ETHERNET, link_layer_of
from clusterctl.inventory.model import Fabric, Host
from clusterctl.survey.collect import HostFacts
from clusterctl.survey.topology import HostTopology

V = TypeVar("V", bound=Hashable)
K = TypeVar("K", bound=Hashable)
T = TypeVar("T")

#: A majority needs at least this many hosts holding a value, and more than half of them agreeing.
MIN_PEERS_FOR_MAJORITY = 3


@dataclass(frozen=True)
class SurveyedHost:
    """One host as the checks see it: inventory entry, facts (``None`` when unreachable), topology."""

    host: Host
    facts: HostFacts | None
    topology: HostTopology | None = None
    #: Why the host could not be surveyed, when ``facts`` is ``None``.
    failure: str | None = None

    @property
    def name(self) -> str:
        return self.host.name

    @property
    def gpus(self) -> tuple[GPUInfo, ...] | None:
        return self.facts.gpus if self.facts else None

    @property
    def gpu_count(self) -> int | None:
        if self.gpus is not None:
            return len(self.gpus)
        return len(self.topology.gpus) if self.topology is not None else None

    # Cached: every fleet comparison groups hosts by it, and the facts never change.
    @cached_property
    def gpu_model(self) -> str | None:
        names = [g.name for g in self.gpus or () if g.name]
        return Counter(names).most_common(1)[0][0] if names else None

    @property
    def gpu_only_control_plane(self) -> bool:
        """A control-plane-only host: GPUs are not expected there."""
        return "worker" not in self.host.roles


def majority(values: Iterable[V], minimum: int = MIN_PEERS_FOR_MAJORITY) -> V | None:
    """The value more than half of ``values`` agree on, given at least ``minimum`` of them."""
    known = list(values)
    if len(known) < minimum:
        return None
    value, count = Counter(known).most_common(1)[0]
    return value if count * 2 > len(known) else None


def majority_by(pairs: Iterable[tuple[K, V | None]]) -> dict[K, V]:
    """Per key, the value more than half of its known values (``None`` is not known) agree on (``majority``)."""
    grouped: dict[K, list[V]] = {}
    for key, value in pairs:
        if value is not None:
            grouped.setdefault(key, []).append(value)
    return {key: usual for key, found in grouped.items() if (usual := majority(found)) is not None}


def usually_active(devices: Iterable[RDMADevice]) -> dict[str, bool]:
    """Per port (``mlx5_0/1``), whether it is active on most of the fleet's hosts that have it."""
    return majority_by((port_key(d, p), p.state == "PORT_ACTIVE") for d in devices for p in d.ports)


#: One port of one card model, whose rate is judged against the same across the fleet: (``mlx5_0/1``, ``card_of``).
CardPort = tuple[str, str | None]


def card_ports(devices: Iterable[RDMADevice]) -> Iterator[tuple[CardPort, float | None]]:
    """Each port of ``devices`` as ``usual_link_rates`` counts it: its card port and its ``link_rate``."""
    return (((port_key(d, p), card_of(d)), link_rate(p)) for d in devices for p in d.ports)


def usual_link_rates(ports: Iterable[tuple[CardPort, float | None]]) -> dict[CardPort, float]:
    """The rate each port of a card runs at on most hosts where it is active (a rate of ``None`` or 0 is not
    known): a 200G card is not a slow 400G one. What survey, health and tune-nccl hold a port to where the
    inventory gives no rate (``rate_basis``)."""
    return majority_by((key, rate or None) for key, rate in ports)


def rate_basis(fabric: Fabric, hca: str, link_layer: str, usual_gbps: float | None,
               fabric_hca: bool | None = None) -> tuple[str, float] | None:
    """What an active port's rate is judged against, as (``inventory`` or ``peers``, Gb/s); ``None``: nothing.

    A port on the fabric (of a ``fabric_hca``, survey's by the GPUs near it; without that, one the inventory's
    ``fabric.hcas`` lists, else any but on an Ethernet fabric, where an RDMA port may be management; and on
    the fabric type's link layer) is held to the inventory's ``fabric.rate_gbps`` where it gives one, whatever
    its peers run at. Any other port (a management or storage NIC, an Ethernet port on an
    InfiniBand fabric), and every port where the inventory gives no rate, to ``usual_gbps``: what the same
    port of the same card runs at on most hosts (``usual_link_rates``), ``None`` without peers.
    """
    if fabric_hca is None:
        fabric_hca = hca in fabric.hcas if fabric.hcas else link_layer_of(fabric.type) != ETHERNET
    on_fabric = fabric_hca and link_layer_of(fabric.type) in (None, link_layer)
    if on_fabric and fabric.rate_gbps:
        return "inventory", fabric.rate_gbps
    return ("peers", usual_gbps) if usual_gbps else None


def slow_port(fabric: Fabric, device: RDMADevice, port: RDMAPort, usual_gbps: float | None,
              fabric_hca: bool | None = None) -> dict[str, Any] | None:
    """The evidence of an active port below what ``rate_basis`` holds it to (``None``: not slow), the same
    fields in survey's ``NIC_SLOW`` and health's ``IB_PORT_SLOW``: its rate, ``expected_gbps`` and ``basis``."""
    judged = rate_basis(fabric, device.hca, port.link_layer, usual_gbps, fabric_hca)
    if judged is None or not runs_slow(link_rate(port), judged[1]):
        return None
    return {"hca": device.hca, "port": port.port, "rate_gbps": port.rate_gbps, "expected_gbps": judged[1],
            "width": port.active_width, "speed": port.active_speed, "basis": judged[0]}


def usual_gpu_count(hosts: Iterable[tuple[str | None, int]], model: str | None) -> int | None:
    """The GPU count most of these (GPU model, GPU count) hosts with ``model`` have, of all of them when the
    model is unknown: a 4-GPU L40S box is not a broken 8-GPU H100 box."""
    return majority(count for host_model, count in hosts if not model or host_model == model)


def usual_pcie_width(widths: Iterable[int | None]) -> int | None:
    """The PCIe link width most of these GPUs (a host's hardware peers', its own included) run at."""
    return majority((w for w in widths if w), minimum=2)


def narrow_pcie(width: int | None, width_max: int | None, usual_width: int | None) -> str | None:
    """Why a GPU's PCIe link is narrower than it can run: ``downtrained`` (narrower than most of its peers'
    GPUs, or with no peers to tell: a reseat) or ``design`` (like its peers: the slot or riser); None when
    at its full width or unknown. Generation is not judged: idle GPUs drop it to save power."""
    if not (width and width_max and width < width_max):
        return None
    return "downtrained" if usual_width is None or width < usual_width else "design"


#: Hosts whose NVLink/PCIe/NIC placement are compared: same GPU model and GPU count.
PeerGroup = tuple[str | None, int | None]
#: GPU pair -> NVLink count most peers have (``None``: no majority).
PairExpectation = dict[tuple[int, int], int | None]


def peer_group(state: SurveyedHost) -> PeerGroup:
    return state.gpu_model, state.gpu_count


def active_lanes(status: NVLinkStatus) -> int:
    return sum(1 for lane in status.lanes if lane.active)


def port_key(device: RDMADevice, port: RDMAPort) -> str:
    return f"{device.hca}/{port.port}"


def gpu_has_near_nic(topology: HostTopology, index: int) -> bool:
    return any(g.has_near_nic for g in topology.gpus if g.index == index)


class MadeOnce:
    """Values made once per key for one run: a fleet's judging (survey, health) or one report's parts.

    Asked per host, fleet values made judging n hosts cost n^2 (every host scanned the others); and
    alike hosts share their parsed outputs (``facts.shared``), so what is made of one parsed object
    alone is made once for all of them. ``holding``: the object whose ``id`` is in the key, kept
    with the value so that no other object takes that identity while it is a key.
    """

    def __init__(self) -> None:
        self._made: dict[Hashable, tuple[object, Any]] = {}

    def get(self, key: Hashable, make: Callable[[], T], *, holding: object = None) -> T:
        found = self._made.get(key)
        if found is None:
            found = self._made[key] = (holding, make())
        return cast(T, found[1])
