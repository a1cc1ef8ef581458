"""Findings: what is wrong with a host, judged against the inventory and its fleet peers.

Each check compares a host with what the inventory expects (fabric rate, stack pin) and
with the *majority* of comparable hosts. "Comparable" matters: an A100 host is compared to
A100 hosts, a port to the same HCA port elsewhere. A majority needs at least
``MIN_PEERS_FOR_MAJORITY`` hosts holding the value and more than half of them agreeing;
without one, only single-host rules apply, tuned to stay quiet on healthy hardware (a
difference that the whole fleet shares is a design, reported as ``info`` at most).

The fleet side of every comparison (peer groups, majorities) lives in ``FleetBaseline``, built
once per survey: asked per host, it made a 1,000-host survey quadratic in hosts.

Severities (see docs/survey.md): lost NVLink, fewer NVLinks, a slow or down fabric NIC, GPU
count differences, ECC errors, a stack pin violated, an unreachable host are errors.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass, field
from enum import Enum
from functools import cached_property
from itertools import combinations
from typing import Any, TypeVar

from clusterctl.facts.model import GPUInfo, NVLinkStatus, RDMADevice, RDMAPort, SoftwareStack
from clusterctl.inventory.model import Host
from clusterctl.survey.collect import HostFacts
from clusterctl.survey.topology import HostTopology, Shape, compress_indices, modal_nvlink_count

V = TypeVar("V", bound=Hashable)

MIN_PEERS_FOR_MAJORITY = 3
#: A NIC this far below the expected rate is slow (rates are computed from width x speed,
#: so a healthy port matches exactly; the margin only absorbs rounding such as 53.125 x 4).
RATE_TOLERANCE = 0.97


class Severity(str, Enum):
    ERROR = "error"
    WARNING = "warning"
    INFO = "info"


SEVERITY_ORDER: dict[Severity, int] = {Severity.ERROR: 0, Severity.WARNING: 1, Severity.INFO: 2}

#: Every code a finding can have, with what it means and the fix to try. Stable: scripts key on them.
CODES: dict[str, tuple[str, str]] = {
    "HOST_UNREACHABLE": ("host could not be surveyed", "Check the address, SSH access and host key: "
                         "clusterctl -l HOST exec -- true"),
    "FACT_MISSING": ("a fact could not be read", "Run the command on the host by hand; install the tool or fix "
                     "the driver it needs."),
    "GPU_COUNT_DIFFERS": ("fewer/more GPUs than peers", "A GPU fell off the bus or is not seen by the driver: "
                          "check dmesg for Xid 79, reseat or replace the GPU."),
    "GPU_MODEL_DIFFERS": ("GPU model differs from peers", "Survey mixed fleets per group (-l GROUP), or fix the "
                          "inventory grouping."),
    "NVLINK_MISSING": ("GPU pair without NVLink where peers have it", "Reset the GPUs / reboot; if it persists, "
                       "the NVLink bridge, baseboard or NVSwitch needs service (run nvidia-smi nvlink -s)."),
    "NVLINK_FEWER_LINKS": ("fewer NVLinks between a GPU pair than peers", "Check nvidia-smi nvlink -s and "
                           "-e (error counters); reboot, then service the baseboard."),
    "NVLINK_LANE_INACTIVE": ("NVLink lanes inactive", "Check nvidia-smi nvlink -e; a reboot or GPU reset may "
                             "retrain the lanes, else service the GPU."),
    "PCIE_DOWNTRAINED": ("PCIe link below its width/generation", "Reseat the GPU or riser, check BIOS PCIe "
                         "settings; re-check generation under load (idle GPUs downclock it)."),
    "PERSISTENCE_OFF": ("persistence mode off", "Enable nvidia-persistenced (systemctl enable --now "
                        "nvidia-persistenced) or run nvidia-smi -pm 1."),
    "ECC_ERRORS": ("uncorrected ECC errors", "Drain the host; check nvidia-smi -q -d ECC,PAGE_RETIREMENT and "
                   "reset the GPU; replace it if errors recur."),
    "NIC_DOWN": ("NIC port down or absent", "Check cable and switch port (ibstat, ibv_devinfo); for RoCE check "
                 "the link and the switch configuration."),
    "NIC_SLOW": ("NIC slower than expected", "Check the cable/transceiver and switch port speed (ibstat); a "
                 "port trained at a lower width or speed needs reseating or a new cable."),
    "GPU_NO_NEAR_NIC": ("GPU without a NIC on its PCIe switch", "GPUDirect RDMA will cross the host bridge: "
                        "expect lower inter-node bandwidth; check NIC placement."),
    "NIC_NUMA_MISMATCH": ("GPU's nearest NIC on the other NUMA node", "Traffic crosses the CPU interconnect: "
                          "move the NIC, or pin ranks to NICs on their own socket."),
    "STACK_PIN_MISMATCH": ("version differs from the inventory's stack pin", "Install the pinned version, "
                           "or update the pin in the inventory."),
    "STACK_DRIFT": ("version differs from the fleet majority", "Align the host with its peers (same "
                    "packages), or pin the version in the inventory."),
}


@dataclass(frozen=True)
class Finding:
    severity: Severity
    code: str
    host: str
    message: str
    evidence: dict[str, Any] = field(default_factory=dict)
    hint: str = ""

    def sort_key(self) -> tuple[int, str, str, str]:
        return (SEVERITY_ORDER[self.severity], self.host, self.code, self.message)


def finding(severity: Severity, code: str, host: str, message: str, **evidence: Any) -> Finding:
    return Finding(severity, code, host, message, evidence, CODES[code][1])


@dataclass(frozen=True)
class HostState:
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


#: Hosts whose NVLink/PCIe/NIC placement are compared: same GPU model and GPU count.
PeerGroup = tuple[str | None, int | None]
#: GPU pair -> NVLink count most peers have (``None``: no majority).
PairExpectation = dict[tuple[int, int], int | None]


def peer_group(state: HostState) -> PeerGroup:
    return state.gpu_model, state.gpu_count


class FleetBaseline:
    """What the fleet looks like, for the checks to compare each host with.

    Built once per survey from every surveyed host. Each value is computed on first use and
    kept per peer group (or port, stack field), so judging n hosts costs O(n) rather than
    recomputing fleet-wide majorities for every host.
    """

    def __init__(self, fleet: Sequence[HostState]) -> None:
        self.reachable: tuple[HostState, ...] = tuple(s for s in fleet if s.facts is not None)
        # "Other hosts" leaves a host out by identity: two hosts may hold equal facts.
        self._times_in_fleet: Counter[int] = Counter(id(s) for s in self.reachable)
        self._readers: Counter[str] = Counter(name for s in self.reachable if s.facts is not None
                                              for name in s.facts.values)
        self._workers = tuple(s for s in self.reachable if not s.gpu_only_control_plane)
        self._groups: dict[PeerGroup, list[HostState]] = {}
        for s in self.reachable:
            self._groups.setdefault(peer_group(s), []).append(s)
        self._ports: dict[str, list[RDMAPort]] = {}
        for s in self.reachable:
            for device in (s.facts.rdma if s.facts else None) or ():
                for port in device.ports:
                    self._ports.setdefault(_port_key(device, port), []).append(port)
        self._gpu_counts: dict[str | None, int | None] = {}
        self._nvlinks: dict[tuple[PeerGroup, tuple[int, ...]], PairExpectation] = {}
        self._lanes: dict[PeerGroup, int | None] = {}
        self._pcie: dict[PeerGroup, tuple[int | None, int | None]] = {}
        self._near_nic: dict[tuple[PeerGroup, int], bool] = {}
        self._port_active: dict[str, bool | None] = {}
        self._port_rate: dict[str, float | None] = {}
        self._stack: dict[str, Any] = {}

    # --- reachability --------------------------------------------------------------

    def others_reachable(self, state: HostState) -> int:
        """Surveyed hosts other than ``state``."""
        return len(self.reachable) - self._times_in_fleet[id(state)]

    def others_reading(self, state: HostState, fact: str) -> int:
        """Surveyed hosts other than ``state`` that could read ``fact``."""
        own = self._times_in_fleet[id(state)] if state.facts is not None and fact in state.facts.values else 0
        return self._readers[fact] - own

    # --- GPUs ----------------------------------------------------------------------

    @cached_property
    def gpu_model(self) -> str | None:
        """The GPU model most workers have."""
        return majority(s.gpu_model for s in self._workers if s.gpu_model)

    def gpu_count(self, model: str | None) -> int | None:
        """The GPU count most workers with ``model`` have (all workers when the model is unknown)."""
        if model not in self._gpu_counts:
            same_model = [s for s in self._workers if s.gpu_model == model] if model else self._workers
            self._gpu_counts[model] = majority(s.gpu_count for s in same_model if s.gpu_count is not None)
        return self._gpu_counts[model]

    def hardware_peers(self, state: HostState) -> list[HostState]:
        """Hosts with the same GPU model and count (``state`` included): whose NVLink/PCIe to compare with."""
        return self._groups.get(peer_group(state), [])

    def nvlinks(self, state: HostState, topology: HostTopology) -> PairExpectation:
        """Per GPU pair, the NVLink count of most hardware peers whose GPUs are numbered alike."""
        key = (peer_group(state), topology.gpu_indices)
        if key not in self._nvlinks:
            peers = [p.topology for p in self.hardware_peers(state)
                     if p.topology is not None and p.topology.gpu_indices == topology.gpu_indices]
            self._nvlinks[key] = {(a, b): majority(p.nvlinks(a, b) for p in peers)
                                  for a, b in combinations(topology.gpu_indices, 2)}
        return self._nvlinks[key]

    def active_lanes(self, state: HostState) -> int | None:
        """The active NVLink lane count per GPU of most GPUs on hardware peers."""
        key = peer_group(state)
        if key not in self._lanes:
            self._lanes[key] = majority(_active_lanes(status) for p in self.hardware_peers(state)
                                        if p.facts and p.facts.nvlink for status in p.facts.nvlink)
        return self._lanes[key]

    def pcie(self, state: HostState) -> tuple[int | None, int | None]:
        """PCIe (width, generation) most GPUs of the hardware peers run at."""
        key = peer_group(state)
        if key not in self._pcie:
            gpus = [g for p in self.hardware_peers(state) for g in p.gpus or ()]
            self._pcie[key] = (majority((g.pcie_width_current for g in gpus if g.pcie_width_current), minimum=2),
                               majority((g.pcie_gen_current for g in gpus if g.pcie_gen_current), minimum=2))
        return self._pcie[key]

    def peers_have_near_nic(self, state: HostState, gpu_index: int) -> bool:
        """Whether most hardware peers have a NIC on the PCIe switch of GPU ``gpu_index``."""
        key = (peer_group(state), gpu_index)
        if key not in self._near_nic:
            self._near_nic[key] = majority(_gpu_has_near_nic(p.topology, gpu_index)
                                           for p in self.hardware_peers(state) if p.topology) is True
        return self._near_nic[key]

    # --- NICs ----------------------------------------------------------------------

    def port_active(self, key: str) -> bool | None:
        """Whether the port ``key`` (``mlx5_0/1``) is active on most hosts that have it."""
        if key not in self._port_active:
            self._port_active[key] = majority(p.state == "PORT_ACTIVE" for p in self._ports.get(key, []))
        return self._port_active[key]

    def port_rate(self, key: str) -> float | None:
        """The rate the port ``key`` runs at on most hosts where it is active."""
        if key not in self._port_rate:
            self._port_rate[key] = majority(p.rate_gbps for p in self._ports.get(key, [])
                                            if p.rate_gbps is not None and p.state == "PORT_ACTIVE")
        return self._port_rate[key]

    # --- software stack ------------------------------------------------------------

    def stack_value(self, attribute: str) -> Any:
        """The value of the ``SoftwareStack`` field most hosts that report it share."""
        if attribute not in self._stack:
            stacks = [s.facts.stack for s in self.reachable if s.facts is not None and s.facts.stack is not None]
            self._stack[attribute] = majority(getattr(s, attribute) for s in stacks if getattr(s, attribute))
        return self._stack[attribute]


# --- checks ----------------------------------------------------------------------------


def check_reachability(state: HostState) -> list[Finding]:
    if state.facts is not None:
        return []
    return [finding(Severity.ERROR, "HOST_UNREACHABLE", state.name, f"not surveyed: {state.failure or 'unknown'}",
                    failure=state.failure)]


#: (severity when peers read it / no peers, severity when no peer could read it either).
_FACT_SEVERITY: dict[str, tuple[Severity, Severity]] = {
    "topology": (Severity.ERROR, Severity.WARNING),
    "gpus": (Severity.ERROR, Severity.WARNING),
    "nvlink": (Severity.WARNING, Severity.INFO),
    "rdma": (Severity.WARNING, Severity.INFO),
    "stack": (Severity.WARNING, Severity.INFO),
}
_GPU_FACTS = frozenset({"topology", "gpus", "nvlink"})


def check_missing_facts(state: HostState, baseline: FleetBaseline) -> list[Finding]:
    if state.facts is None:
        return []
    out: list[Finding] = []
    reachable = baseline.others_reachable(state)
    for lost in state.facts.missing:
        with_peers, alone = _FACT_SEVERITY.get(lost.fact, (Severity.INFO, Severity.INFO))
        readers = baseline.others_reading(state, lost.fact)
        if state.gpu_only_control_plane and lost.fact in _GPU_FACTS:
            severity = Severity.INFO
        elif not reachable:
            severity = alone if lost.fact != "rdma" or state.host.fabric.type not in ("ib", "roce") else with_peers
            # With no peers, "no GPU facts" still makes the host useless to a GPU cluster.
            if lost.fact in ("topology", "gpus"):
                severity = Severity.WARNING
        elif readers * 2 > reachable:
            severity = with_peers
        else:
            severity = Severity.INFO
        out.append(finding(severity, "FACT_MISSING", state.name, f"{lost.fact}: {lost.reason}",
                           fact=lost.fact, reason=lost.reason))
    return out


def check_gpu_inventory(state: HostState, baseline: FleetBaseline) -> list[Finding]:
    if state.facts is None or state.gpu_only_control_plane:
        return []
    out: list[Finding] = []
    expected_model = baseline.gpu_model
    model = state.gpu_model
    if expected_model and model and model != expected_model:
        out.append(finding(Severity.WARNING, "GPU_MODEL_DIFFERS", state.name,
                           f"GPUs are {model}; most hosts have {expected_model}",
                           model=model, fleet_model=expected_model))
    # Count peers share the model: a 4-GPU L40S box is not a broken 8-GPU H100 box.
    expected_count = baseline.gpu_count(model)
    count = state.gpu_count
    if expected_count is not None and count is not None and count != expected_count:
        out.append(finding(Severity.ERROR, "GPU_COUNT_DIFFERS", state.name,
                           f"{count} GPUs; peers have {expected_count}", gpus=count, fleet_gpus=expected_count))
    return out


def check_nvlink_pairs(state: HostState, baseline: FleetBaseline) -> list[Finding]:
    topology = state.topology
    if topology is None or len(topology.gpus) < 2:
        return []
    peers_expect = baseline.nvlinks(state, topology)
    missing: list[dict[str, Any]] = []
    fewer: list[dict[str, Any]] = []
    used_peers = False
    single_modal, linked_fraction = modal_nvlink_count(topology)
    for a, b in combinations(topology.gpu_indices, 2):
        have = topology.nvlinks(a, b)
        expected = peers_expect[a, b]
        if expected is not None:
            used_peers = True
        else:
            expected = _single_host_expectation(topology, single_modal, linked_fraction, have)
        if not expected or have >= expected:
            continue
        link = topology.gpu_link(a, b)
        pair = {"gpus": [a, b], "link": link.raw if link else None, "expected": f"NV{expected}"}
        (fewer if have else missing).append(pair)
    basis = "peers" if used_peers else "the rest of this host"
    out: list[Finding] = []
    if missing:
        shown = ", ".join(f"GPU{p['gpus'][0]}-GPU{p['gpus'][1]} {p['link']} (expected {p['expected']})"
                          for p in missing)
        out.append(finding(Severity.ERROR, "NVLINK_MISSING", state.name,
                           f"no NVLink between {shown}, compared with {basis}", pairs=missing, basis=basis))
    if fewer:
        shown = ", ".join(f"GPU{p['gpus'][0]}-GPU{p['gpus'][1]} {p['link']} (expected {p['expected']})"
                          for p in fewer)
        out.append(finding(Severity.ERROR, "NVLINK_FEWER_LINKS", state.name,
                           f"fewer NVLinks: {shown}, compared with {basis}", pairs=fewer, basis=basis))
    return out


def _single_host_expectation(topology: HostTopology, modal: int, linked_fraction: float, have: int) -> int:
    """NV count a pair should have judging by the host alone (0 = no expectation).

    Only a near-complete mesh is judged: at least 3/4 of the pairs NVLinked and the host not
    a hybrid cube mesh (whose missing pairs are by design). Fewer-links is judged only on
    NVSwitch-era counts (>= 4): V100/P100 meshes mix NV1 and NV2 by design.
    """
    if topology.shape is Shape.HYBRID_CUBE_MESH or linked_fraction < 0.75 or modal == 0:
        return 0
    if have == 0:
        return modal
    return modal if modal >= 4 else 0


def _active_lanes(status: NVLinkStatus) -> int:
    return sum(1 for lane in status.lanes if lane.active)


def check_nvlink_lanes(state: HostState, baseline: FleetBaseline) -> list[Finding]:
    statuses = state.facts.nvlink if state.facts else None
    if not statuses:
        return []
    active = {s.gpu_index: _active_lanes(s) for s in statuses}
    expected = baseline.active_lanes(state) or majority(active.values(), minimum=2)
    if not expected:
        return []
    out: list[Finding] = []
    for status in statuses:
        if active[status.gpu_index] >= expected:
            continue
        inactive = [lane.link for lane in status.lanes if not lane.active]
        out.append(finding(Severity.WARNING, "NVLINK_LANE_INACTIVE", state.name,
                           f"GPU{status.gpu_index}: {active[status.gpu_index]} of {expected} NVLink lanes active "
                           f"(inactive: {', '.join(map(str, inactive))})",
                           gpu=status.gpu_index, active=active[status.gpu_index], expected=expected,
                           inactive_lanes=inactive))
    return out


def check_pcie(state: HostState, baseline: FleetBaseline) -> list[Finding]:
    gpus = state.gpus
    if not gpus:
        return []
    expected_width, expected_gen = baseline.pcie(state)
    narrow: list[dict[str, Any]] = []
    by_design: list[int] = []
    slow_gen: list[dict[str, Any]] = []
    for gpu in gpus:
        width, width_max = gpu.pcie_width_current, gpu.pcie_width_max
        if width and width_max and width < width_max:
            if expected_width is None or width < expected_width:
                narrow.append({"gpu": gpu.index, "width": width, "width_max": width_max})
            else:
                by_design.append(gpu.index)
        gen, gen_max = gpu.pcie_gen_current, gpu.pcie_gen_max
        # Idle GPUs drop the PCIe generation to save power: only one below its peers is noted.
        if gen and gen_max and gen < gen_max and expected_gen is not None and gen < expected_gen:
            slow_gen.append({"gpu": gpu.index, "gen": gen, "gen_max": gen_max, "peers_gen": expected_gen})
    out: list[Finding] = []
    for item in narrow:
        out.append(finding(Severity.ERROR, "PCIE_DOWNTRAINED", state.name,
                           f"GPU{item['gpu']} PCIe link x{item['width']} of x{item['width_max']}", **item))
    if by_design:
        out.append(finding(Severity.INFO, "PCIE_DOWNTRAINED", state.name,
                           f"GPUs {compress_indices(by_design)} run below their maximum PCIe width, like their "
                           "peers (slot or riser design)", gpus=by_design))
    if slow_gen:
        shown = ", ".join(f"GPU{i['gpu']} gen{i['gen']}" for i in slow_gen)
        out.append(finding(Severity.INFO, "PCIE_DOWNTRAINED", state.name,
                           f"PCIe generation below peers ({shown}); normal when idle, re-check under load",
                           gpus=slow_gen))
    return out


def check_gpu_health(state: HostState) -> list[Finding]:
    gpus = state.gpus or ()
    out: list[Finding] = []
    off = [g.index for g in gpus if g.persistence_mode is False]
    if off:
        out.append(finding(Severity.WARNING, "PERSISTENCE_OFF", state.name,
                           f"persistence mode off on GPUs {compress_indices(off)}", gpus=off))
    for gpu in gpus:
        if gpu.ecc_errors_uncorrected:
            out.append(finding(Severity.ERROR, "ECC_ERRORS", state.name,
                               f"GPU{gpu.index}: {gpu.ecc_errors_uncorrected} uncorrected ECC errors (volatile)",
                               gpu=gpu.index, uncorrected=gpu.ecc_errors_uncorrected))
    return out


# --- NICs ------------------------------------------------------------------------------

_LINK_LAYER_OF_FABRIC = {"ib": "InfiniBand", "roce": "Ethernet", "ethernet": "Ethernet"}


def fabric_hcas(state: HostState) -> set[str]:
    """HCAs that carry GPU traffic: the inventory's list, else the NICs on a GPU's PCIe switch.

    A storage or management NIC (no GPU near it, or the wrong link layer for the fabric)
    is not one, so its rate and state are only compared with the same NIC on peers.
    """
    fabric = state.host.fabric
    if fabric.hcas:
        return set(fabric.hcas)
    devices = (state.facts.rdma if state.facts else None) or ()
    layer = _LINK_LAYER_OF_FABRIC.get(fabric.type or "")
    candidates = {d.hca for d in devices if layer is None or any(p.link_layer == layer for p in d.ports)}
    if state.topology is not None and state.topology.nics:
        near = {name for g in state.topology.gpus if g.has_near_nic for name in g.nearest_nics}
        return candidates & near if devices else near
    return candidates


def _port_key(device: RDMADevice, port: RDMAPort) -> str:
    return f"{device.hca}/{port.port}"


def check_nics(state: HostState, baseline: FleetBaseline) -> list[Finding]:
    if state.facts is None:
        return []
    devices = state.facts.rdma
    fabric = fabric_hcas(state)
    out: list[Finding] = []
    if devices is None:
        return _check_netdevs(state, fabric)
    present = {d.hca for d in devices}
    for hca in sorted(set(state.host.fabric.hcas) - present):
        out.append(finding(Severity.ERROR, "NIC_DOWN", state.name, f"{hca}: expected by the inventory, not found",
                           hca=hca, state="absent"))
    expected_rate = state.host.fabric.rate_gbps
    for device in devices:
        is_fabric = device.hca in fabric
        active_ports = [p for p in device.ports if p.state == "PORT_ACTIVE"]
        for port in device.ports:
            key = _port_key(device, port)
            peers_active = baseline.port_active(key)
            if port.state != "PORT_ACTIVE":
                # A fabric HCA with no port up is down; a spare port is down only if peers use it.
                if is_fabric and not active_ports:
                    severity: Severity | None = Severity.ERROR
                elif peers_active:
                    severity = Severity.WARNING
                else:
                    severity = None
                if severity is not None:
                    out.append(finding(severity, "NIC_DOWN", state.name,
                                       f"{key} is {port.state} ({port.phys_state or 'unknown phys state'})",
                                       hca=device.hca, port=port.port, state=port.state,
                                       phys_state=port.phys_state, fabric=is_fabric))
                continue
            out.extend(_check_rate(state, device, port, is_fabric, expected_rate, baseline.port_rate(key)))
    return out


def _check_rate(state: HostState, device: RDMADevice, port: RDMAPort, is_fabric: bool,
                expected_rate: float | None, peers_rate: float | None) -> list[Finding]:
    if port.rate_gbps is None:
        return []
    key = _port_key(device, port)
    layer_ok = state.host.fabric.type is None or _LINK_LAYER_OF_FABRIC.get(state.host.fabric.type) == port.link_layer
    if is_fabric and layer_ok and expected_rate and port.rate_gbps < expected_rate * RATE_TOLERANCE:
        return [finding(Severity.ERROR, "NIC_SLOW", state.name,
                        f"{key} at {port.rate_gbps:g} Gb/s; the inventory's fabric is {expected_rate:g} Gb/s",
                        hca=device.hca, port=port.port, rate_gbps=port.rate_gbps, expected_gbps=expected_rate,
                        width=port.active_width, speed=port.active_speed, basis="inventory")]
    if peers_rate and port.rate_gbps < peers_rate * RATE_TOLERANCE:
        return [finding(Severity.ERROR if is_fabric else Severity.WARNING, "NIC_SLOW", state.name,
                        f"{key} at {port.rate_gbps:g} Gb/s; the same port on peers runs at {peers_rate:g} Gb/s",
                        hca=device.hca, port=port.port, rate_gbps=port.rate_gbps, expected_gbps=peers_rate,
                        width=port.active_width, speed=port.active_speed, basis="peers")]
    return []


def _check_netdevs(state: HostState, fabric: set[str]) -> list[Finding]:
    """Without ibv_devinfo, ibdev2netdev still tells a fabric port that is down."""
    out: list[Finding] = []
    for dev in (state.facts.netdev if state.facts else None) or ():
        if dev.hca in fabric and dev.up is False:
            out.append(finding(Severity.ERROR, "NIC_DOWN", state.name,
                               f"{dev.hca}/{dev.port} ({dev.name}) is Down", hca=dev.hca, port=dev.port,
                               netdev=dev.name, state="Down"))
    return out


def check_locality(state: HostState, baseline: FleetBaseline) -> list[Finding]:
    """GPUs without a NIC on their PCIe switch, or whose nearest NIC is on the other socket.

    Where the peers are wired the same way this is the machine's design: ``info``. It is a
    warning when peers have a near NIC for that GPU (a NIC missing or moved).
    """
    topology = state.topology
    if topology is None or not topology.gpus:
        return []
    if not topology.nics:
        return []
    no_near: list[int] = []
    far: list[int] = []
    for gpu in topology.gpus:
        if gpu.has_near_nic:
            continue
        (far if gpu.nic_link == "SYS" else no_near).append(gpu.index)
    out: list[Finding] = []
    for code, indices, words in (
        ("GPU_NO_NEAR_NIC", no_near, "have no NIC on their PCIe switch (nearest is {link})"),
        ("NIC_NUMA_MISMATCH", far, "reach their nearest NIC only across the CPU interconnect (SYS)"),
    ):
        if not indices:
            continue
        peer_has_near = [i for i in indices if baseline.peers_have_near_nic(state, i)]
        severity = Severity.WARNING if peer_has_near else Severity.INFO
        links = sorted({g.nic_link or "?" for g in topology.gpus if g.index in indices})
        nearest = {f"GPU{g.index}": {"nics": list(g.nearest_nics), "link": g.nic_link, "numa": g.numa_node}
                   for g in topology.gpus if g.index in indices}
        design = "" if peer_has_near else " (same on peers or no peers: likely the machine's design)"
        out.append(finding(severity, code, state.name,
                           f"GPUs {compress_indices(indices)} " + words.format(link="/".join(links)) + design,
                           gpus=indices, nearest=nearest, peers_have_near_nic=peer_has_near))
    return out


def _gpu_has_near_nic(topology: HostTopology, index: int) -> bool:
    return any(g.has_near_nic for g in topology.gpus if g.index == index)


# --- software stack --------------------------------------------------------------------

#: Pin name -> SoftwareStack attributes to read, first non-empty wins.
_PIN_FIELDS: dict[str, tuple[str, ...]] = {
    "driver": ("driver",),
    "cuda": ("cuda",),
    "nccl": ("nccl",),
    "kubernetes": ("kubelet", "kubeadm"),
    "containerd": ("containerd",),
}
#: Installed by ``clusterctl bootstrap``: absent before it, so "not installed" is only info.
_BOOTSTRAPPED = frozenset({"kubernetes", "containerd"})
DRIFT_FIELDS: tuple[str, ...] = ("driver", "cuda", "nccl", "kernel", "containerd", "kubelet", "os_version")


def version_matches(pin: str, actual: str) -> bool:
    """``535`` matches ``535.104.05``; ``v1.29`` matches ``1.29.3``; ``12.2`` does not match ``12.20``."""
    want = pin.strip().lstrip("vV").split(".")
    have = actual.strip().lstrip("vV").split(".")
    return have[: len(want)] == want


def _stack_value(stack: SoftwareStack, names: tuple[str, ...]) -> tuple[str | None, str]:
    for name in names:
        value = getattr(stack, name)
        if value:
            return str(value), name
    return None, names[0]


def check_stack(state: HostState, baseline: FleetBaseline) -> list[Finding]:
    stack = state.facts.stack if state.facts else None
    if stack is None:
        return []
    out: list[Finding] = []
    pin_failed: set[str] = set()
    for component, pin in state.host.stack.pinned().items():
        value, attribute = _stack_value(stack, _PIN_FIELDS.get(component, (component,)))
        if value is None:
            reason = stack.missing.get(attribute, "not found")
            severity = Severity.INFO if component in _BOOTSTRAPPED else Severity.WARNING
            out.append(finding(severity, "STACK_PIN_MISMATCH", state.name,
                               f"{component}: pinned {pin}, not installed ({reason})",
                               component=component, pinned=pin, installed=None, reason=reason))
            pin_failed.add(attribute)
        elif not version_matches(pin, value):
            out.append(finding(Severity.ERROR, "STACK_PIN_MISMATCH", state.name,
                               f"{component}: {value} installed, inventory pins {pin}",
                               component=component, pinned=pin, installed=value))
            pin_failed.add(attribute)
    for attribute in DRIFT_FIELDS:
        if attribute in pin_failed:
            continue
        expected = baseline.stack_value(attribute)
        value = getattr(stack, attribute)
        if expected is None or value == expected:
            continue
        shown = value or f"not found ({stack.missing.get(attribute, 'not installed')})"
        out.append(finding(Severity.WARNING, "STACK_DRIFT", state.name,
                           f"{attribute}: {shown}; most hosts run {expected}",
                           component=attribute, installed=value, fleet=expected))
    return out


# --- all together ----------------------------------------------------------------------


def host_findings(state: HostState, fleet: Sequence[HostState], baseline: FleetBaseline | None = None
                  ) -> list[Finding]:
    """Every finding for one host; ``fleet`` holds all surveyed hosts (``state`` included).

    Pass the fleet's ``baseline`` when judging several hosts of it: building one reads the whole fleet.
    """
    if state.facts is None:
        return check_reachability(state)
    if baseline is None:
        baseline = FleetBaseline(fleet)
    found = [
        *check_missing_facts(state, baseline),
        *check_gpu_inventory(state, baseline),
        *check_nvlink_pairs(state, baseline),
        *check_nvlink_lanes(state, baseline),
        *check_pcie(state, baseline),
        *check_gpu_health(state),
        *check_nics(state, baseline),
        *check_locality(state, baseline),
        *check_stack(state, baseline),
    ]
    return sorted(found, key=Finding.sort_key)


def fleet_findings(fleet: Sequence[HostState]) -> list[Finding]:
    baseline = FleetBaseline(fleet)
    return sorted((f for state in fleet for f in host_findings(state, fleet, baseline)), key=Finding.sort_key)
