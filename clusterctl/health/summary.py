"""The facts of a host's probes that a saved report keeps, for ``health compare``: plain JSON values.

Counters and states keyed by something stable across runs (GPU bus id, ``gpu/link``,
``hca/port``), so two saved runs line up host by host and key by key.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from operator import attrgetter
from typing import Any

from clusterctl.facts.health_model import IBCounters, KernelLog, NvidiaSmiQuery, NVLinkErrors, PciDevices
from clusterctl.facts.model import NVLinkStatus, RDMADevices, warnings_of
from clusterctl.health.probe import HostProbe, parsers
from clusterctl.plain_json import to_plain
from clusterctl.survey.checks.host import MadeOnce, active_lanes


def host_facts(probe: HostProbe, shared: MadeOnce | None = None) -> dict[str, Any]:
    """The facts of one host's probes. With ``shared``, parts read from one parsed object (alike hosts'
    identical outputs are parsed once, ``facts.shared``) are made once and are the same dicts in every
    host's facts: a fleet's report holds them once, and ``-o json`` writes each once."""
    kept = shared or MadeOnce()

    def part(source: Any, make: Callable[[Any], Any]) -> Any:
        return kept.get((id(source), make), partial(make, source), holding=source)
    facts: dict[str, Any] = {}
    if probe.smi is not None:
        facts["driver"] = probe.smi.driver_version
        facts["cuda"] = probe.smi.cuda_version
        facts["attached_gpus"] = probe.smi.attached_gpus
        facts["lost_gpus"] = list(probe.smi.lost_gpus)
        facts["gpus"] = part(probe.smi, _gpus)
    if probe.kernel is not None:
        facts["kernel_events"] = part(probe.kernel, _kernel_events)
        facts["kernel_log_source"] = probe.kernel.source
        facts["kernel_log_lines"] = probe.kernel.lines
        facts["kernel_log_unreadable"] = probe.kernel.unreadable
    if probe.nvlink is not None:
        facts["nvlink"] = part(probe.nvlink, _nvlink)
    if probe.nvlink_errors is not None:
        facts["nvlink_errors"] = part(probe.nvlink_errors, _nvlink_errors)
        # Blackwell drivers' traffic, FEC histogram and bit error rates: beside the errors, never compared as them.
        if statistics := part(probe.nvlink_errors, _nvlink_statistics):
            facts["nvlink_statistics"] = statistics
    if probe.rdma is not None:
        facts["ib_ports"] = part(probe.rdma, _ib_ports)
        # The link of each port: a DDR 20 Gb/s port or one at 10 among 200s is seen here.
        facts["ib_links"] = part(probe.rdma, _ib_links)
        facts["ib_devices"] = part(probe.rdma, _ib_devices)
    if probe.ib_counters is not None:
        facts["ib_counters"] = part(probe.ib_counters, _ib_counters)
        facts["ib_counters_source"] = probe.ib_counters.source
    if probe.pci is not None:
        facts["acs_redirect_bridges"] = part(probe.pci, _acs_redirect_bridges)
        facts["pci_devices"] = part(probe.pci, _pci_devices)
    if probe.dcgm is not None:
        facts["dcgm_failed"] = [r.name for r in probe.dcgm.failed]
        # Every result, Pass, Skip and Warn too: a skipped test must never read as a pass.
        dcgm = probe.dcgm
        facts["dcgm"] = {**_fields(dcgm, ("dcgm_version", "driver_version", "gpu_device_ids", "format", "metadata")),
                         "results": [_fields(r, ("category", "test", "gpu", "status", "info")) for r in dcgm.results]}
    if probe.nccl is not None:
        from clusterctl.bench.payload import nccl_host_run_record

        # Level 2+: the host's nccl-tests run, every figure its parser read, as bench nccl records it.
        facts["nccl"] = nccl_host_run_record(probe.nccl)
    # What a parser could not read of an output it read in part (lines of that probe's output).
    warnings = [{"probe": name, **w.to_json()} for name in parsers()
                for w in warnings_of(getattr(probe, name))]
    if warnings:
        facts["parse_warnings"] = warnings
    if probe.problems:
        facts["problems"] = to_plain(probe.problems)
    return facts


#: Each GPU's facts after its index, in the report's order, and the ``GpuHealth`` field each holds: the field's
#: name (``ecc.``: an ECC count, ``ecc_`` in the report), the current PCIe width kept as ``pcie_width``.
_GPU_FACTS = {("pcie_width" if name == "pcie_width_current" else name.replace(".", "_")): attrgetter(name) for name in (
    "name", "uuid", "ecc.volatile_uncorrectable", "ecc.volatile_correctable", "ecc.aggregate_uncorrectable",
    "ecc.aggregate_correctable", "remapped_rows_uncorrectable", "remapped_rows_correctable", "remap_pending",
    "remap_failure", "retired_pages_sbe", "retired_pages_dbe", "pcie_replays", "pcie_width_current",
    "temperature_c", "power_limit_w", "clock_events_active", "ecc_mode", "minor_number", "notes", "unread",
    "serial", "persistence_mode", "mig_mode", "retired_pages_pending", "slowdown_temp_c", "shutdown_temp_c",
    "t_limit_margin_c", "memory_temperature_c", "memory_max_operating_temp_c", "power_draw_w", "pcie_gen_current",
    "pcie_gen_max", "pcie_width_max", "reset_required", "drain_and_reset_recommended", "recovery_action",
    "fabric_state", "fabric_status", "fabric_health_summary", "fabric_bandwidth", "fabric_route_recovery_in_progress",
    "fabric_route_unhealthy", "fabric_access_timeout_recovery", "fabric_incorrect_configuration",
    "channel_repair_pending", "tpc_repair_pending")}


def _gpus(smi: NvidiaSmiQuery) -> dict[str, Any]:
    return {g.bus_id: {"index": g.index if g.index_known else None,
                       **{key: to_plain(read(g)) for key, read in _GPU_FACTS.items()}} for g in smi.gpus}


def _fields(item: Any, names: tuple[str, ...]) -> dict[str, Any]:
    """These fields of ``item`` as plain JSON values, by name."""
    return {name: to_plain(getattr(item, name)) for name in names}


def _kernel_events(kernel: KernelLog) -> dict[str, dict[str, Any]]:
    xids: dict[str, dict[str, Any]] = {}
    for e in kernel.events:
        key = f"{e.kind}:{e.code if e.code is not None else '-'}@{e.pci or '?'}"
        entry = xids.setdefault(key, {"kind": e.kind, "code": e.code, "pci": e.pci, "count": 0})
        entry["count"] += 1
        entry["last"] = e.text
        entry["last_at"] = e.timestamp
    return xids


def _nvlink(nvlink: tuple[NVLinkStatus, ...]) -> dict[str, Any]:
    return {str(s.gpu_index): {"active": active_lanes(s),
                               "inactive": [lane.link for lane in s.lanes if not lane.active],
                               "gpu_name": s.gpu_name, "uuid": s.uuid, "all_inactive": s.all_inactive,
                               "speeds_gbps": {str(lane.link): lane.speed_gbps for lane in s.lanes}}
            for s in nvlink}


def _nvlink_errors(errors: NVLinkErrors) -> dict[str, Any]:
    return {f"{e.gpu_index}/{e.link}": dict(e.counters) for e in errors.links}


def _nvlink_statistics(errors: NVLinkErrors) -> dict[str, Any]:
    return {f"{e.gpu_index}/{e.link}": dict(e.statistics) for e in errors.links if e.statistics}


def _ib_ports(rdma: RDMADevices) -> dict[str, Any]:
    return {f"{d.hca}/{p.port}": p.state for d in rdma for p in d.ports}


def _ib_links(rdma: RDMADevices) -> dict[str, Any]:
    return {f"{d.hca}/{p.port}": p.to_json() for d in rdma for p in d.ports}


def _ib_devices(rdma: RDMADevices) -> dict[str, Any]:
    return {d.hca: _fields(d, ("fw_version", "node_guid", "board_id", "ca_type")) for d in rdma}


def _ib_counters(counters: IBCounters) -> dict[str, Any]:
    return {f"{p.hca}/{p.port}": dict(p.counters) for p in counters.ports}


def _acs_redirect_bridges(pci: PciDevices) -> list[str]:
    return [d.address for d in pci.devices if d.is_bridge and d.acs_redirects]


def _pci_devices(pci: PciDevices) -> dict[str, Any]:
    """The devices health judges: GPUs, NICs and the bridges above them (an 8-GPU host's lspci lists ~500
    devices, USB and SATA controllers among them, which have no bearing on the GPUs' and NICs' paths)."""
    return {d.address: _fields(d, ("device_class", "description", "port_type", "link_cap", "link_status",
                                   "speed_downgraded", "width_downgraded", "acs_control", "secondary_bus",
                                   "subordinate_bus", "access_denied"))
            for d in pci.devices if d.is_bridge or d.is_gpu or d.is_nic}
