"""NIC checks: fabric HCAs present, up and at rate; GPU-NIC locality on the PCIe tree."""

from __future__ import annotations

from clusterctl.facts.model import RDMADevice, RDMAPort
from clusterctl.facts.rdma import card_of
from clusterctl.inventory.fabric import link_layer_of
from clusterctl.survey.checks.baseline import FleetBaseline
from clusterctl.survey.checks.codes import Finding, Severity, finding
from clusterctl.survey.checks.host import SurveyedHost, port_key, slow_port
from clusterctl.survey.topology import compress_indices


def fabric_hcas(state: SurveyedHost) -> set[str]:
    """HCAs that carry GPU traffic: the inventory's list, else the NICs on a GPU's PCIe switch.

    A storage or management NIC (no GPU near it, or the wrong link layer for the fabric)
    is not one, so its rate and state are only compared with the same NIC on peers.
    """
    fabric = state.host.fabric
    if fabric.hcas:
        return set(fabric.hcas)
    devices = (state.facts.rdma if state.facts else None) or ()
    layer = link_layer_of(fabric.type)
    candidates = {d.hca for d in devices if layer is None or any(p.link_layer == layer for p in d.ports)}
    if state.topology is not None and state.topology.nics:
        near = {name for g in state.topology.gpus if g.has_near_nic for name in g.nearest_nics}
        return candidates & near if devices else near
    return candidates


def check_nics(state: SurveyedHost, baseline: FleetBaseline) -> list[Finding]:
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
    for device in devices:
        is_fabric = device.hca in fabric
        active_ports = [p for p in device.ports if p.state == "PORT_ACTIVE"]
        for port in device.ports:
            key = port_key(device, port)
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
            peers_rate = baseline.port_rate(key, card_of(device))
            out.extend(_check_rate(state, device, port, is_fabric, peers_rate))
    return out


def _check_rate(state: SurveyedHost, device: RDMADevice, port: RDMAPort, is_fabric: bool,
                peers_rate: float | None) -> list[Finding]:
    slow = slow_port(state.host.fabric, device, port, peers_rate, is_fabric)
    if slow is None:
        return []
    words = "the inventory's fabric is" if slow["basis"] == "inventory" else "the same port on peers runs at"
    return [finding(Severity.ERROR if is_fabric else Severity.WARNING, "NIC_SLOW", state.name,
                    f"{port_key(device, port)} at {port.rate_gbps:g} Gb/s; {words} {slow['expected_gbps']:g} Gb/s",
                    **slow)]


def _check_netdevs(state: SurveyedHost, fabric: set[str]) -> list[Finding]:
    """Without ibv_devinfo, ibdev2netdev still tells a fabric port that is down."""
    return [finding(Severity.ERROR, "NIC_DOWN", state.name, f"{dev.hca}/{dev.port} ({dev.name}) is Down",
                    hca=dev.hca, port=dev.port, netdev=dev.name, state="Down")
            for dev in (state.facts.netdev if state.facts else None) or () if dev.hca in fabric and dev.up is False]


def check_locality(state: SurveyedHost, baseline: FleetBaseline) -> list[Finding]:
    """GPUs without a NIC on their PCIe switch, or whose nearest NIC is on the other socket.

    Where the peers are wired the same way this is the machine's design: ``info``. It is a
    warning when peers have a near NIC for that GPU (a NIC missing or moved). A matrix with no NIC
    columns on a host with RDMA devices (driver 610 on B300) tells no GPU-NIC path: a warning, not "no NIC".
    """
    topology = state.topology
    if topology is None or not topology.gpus:
        return []
    if not topology.nics:
        hcas = sorted({d.hca for d in (state.facts.rdma if state.facts else None) or ()})
        return [finding(Severity.WARNING, "TOPO_NO_NICS", state.name, f"nvidia-smi topo -m names no NICs, but the "
                        f"host has {len(hcas)} RDMA device(s) ({', '.join(hcas)}): GPU-NIC affinity is unknown",
                        hcas=hcas)] if hcas else []
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
