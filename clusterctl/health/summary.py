"""The facts of a host's probes that a saved report keeps, for ``health compare``: plain JSON values.

Counters and states keyed by something stable across runs (GPU bus id, ``gpu/link``,
``hca/port``), so two saved runs line up host by host and key by key.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from clusterctl.facts.health_model import IBCounters, KernelLog, NvidiaSmiQuery, NVLinkErrors, PciDevices
from clusterctl.facts.model import NVLinkStatus, RDMADevices
from clusterctl.health.probe import HostProbe
from clusterctl.survey.checks.host import MadeOnce


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
        facts["gpus"] = part(probe.smi, _gpus)
    if probe.kernel is not None:
        facts["kernel_events"] = part(probe.kernel, _kernel_events)
        facts["kernel_log_source"] = probe.kernel.source
    if probe.nvlink is not None:
        facts["nvlink"] = part(probe.nvlink, _nvlink)
    if probe.nvlink_errors is not None:
        facts["nvlink_errors"] = part(probe.nvlink_errors, _nvlink_errors)
    if probe.rdma is not None:
        facts["ib_ports"] = part(probe.rdma, _ib_ports)
        # The link of each port: a DDR 20 Gb/s port or one at 10 among 200s is seen here.
        facts["ib_links"] = part(probe.rdma, _ib_links)
    if probe.ib_counters is not None:
        facts["ib_counters"] = part(probe.ib_counters, _ib_counters)
    if probe.pci is not None:
        facts["acs_redirect_bridges"] = part(probe.pci, _acs_redirect_bridges)
    if probe.dcgm is not None:
        facts["dcgm_failed"] = [f"{r.test}@GPU{r.gpu}" if r.gpu is not None else r.test for r in probe.dcgm.failed]
        # Every result, Pass, Skip and Warn too: a skipped test must never read as a pass.
        facts["dcgm"] = {"dcgm_version": probe.dcgm.dcgm_version, "driver_version": probe.dcgm.driver_version,
                         "gpu_device_ids": list(probe.dcgm.gpu_device_ids),
                         "results": [{"category": r.category, "test": r.test, "gpu": r.gpu, "status": r.status,
                                      "info": r.info} for r in probe.dcgm.results]}
    if probe.nccl is not None:
        from clusterctl.bench.payload import nccl_host_run_record

        # Level 2+: the host's nccl-tests run, every figure its parser read, as bench nccl records it.
        facts["nccl"] = nccl_host_run_record(probe.nccl)
    if probe.problems:
        facts["problems"] = [{"probe": p.probe, "tool": p.tool, "kind": p.kind, "reason": p.reason}
                             for p in probe.problems]
    return facts


def _gpus(smi: NvidiaSmiQuery) -> dict[str, Any]:
    return {
        g.bus_id: {
            "index": g.index if g.index_known else None, "name": g.name, "uuid": g.uuid,
            "ecc_volatile_uncorrectable": g.ecc.volatile_uncorrectable,
            "ecc_volatile_correctable": g.ecc.volatile_correctable,
            "ecc_aggregate_uncorrectable": g.ecc.aggregate_uncorrectable,
            "ecc_aggregate_correctable": g.ecc.aggregate_correctable,
            "remapped_rows_uncorrectable": g.remapped_rows_uncorrectable,
            "remapped_rows_correctable": g.remapped_rows_correctable,
            "remap_pending": g.remap_pending, "remap_failure": g.remap_failure,
            "retired_pages_sbe": g.retired_pages_sbe, "retired_pages_dbe": g.retired_pages_dbe,
            "pcie_replays": g.pcie_replays, "pcie_width": g.pcie_width_current,
            "temperature_c": g.temperature_c, "power_limit_w": g.power_limit_w,
            "clock_events_active": list(g.clock_events_active),
            "ecc_mode": g.ecc_mode, "minor_number": g.minor_number,
            "notes": list(g.notes), "unread": list(g.unread),
        }
        for g in smi.gpus
    }


def _kernel_events(kernel: KernelLog) -> dict[str, dict[str, Any]]:
    xids: dict[str, dict[str, Any]] = {}
    for e in kernel.events:
        key = f"{e.kind}:{e.code if e.code is not None else '-'}@{e.pci or '?'}"
        entry = xids.setdefault(key, {"kind": e.kind, "code": e.code, "pci": e.pci, "count": 0})
        entry["count"] += 1
        entry["last"] = e.text
    return xids


def _nvlink(nvlink: tuple[NVLinkStatus, ...]) -> dict[str, Any]:
    return {str(s.gpu_index): {"active": sum(1 for lane in s.lanes if lane.active),
                               "inactive": [lane.link for lane in s.lanes if not lane.active],
                               "speeds_gbps": {str(lane.link): lane.speed_gbps for lane in s.lanes}}
            for s in nvlink}


def _nvlink_errors(errors: NVLinkErrors) -> dict[str, Any]:
    return {f"{e.gpu_index}/{e.link}": dict(e.counters) for e in errors.links}


def _ib_ports(rdma: RDMADevices) -> dict[str, Any]:
    return {f"{d.hca}/{p.port}": p.state for d in rdma for p in d.ports}


def _ib_links(rdma: RDMADevices) -> dict[str, Any]:
    return {f"{d.hca}/{p.port}": {"state": p.state, "phys_state": p.phys_state, "link_layer": p.link_layer,
                                  "rate_gbps": p.rate_gbps, "active_width": p.active_width,
                                  "active_speed": p.active_speed}
            for d in rdma for p in d.ports}


def _ib_counters(counters: IBCounters) -> dict[str, Any]:
    return {f"{p.hca}/{p.port}": dict(p.counters) for p in counters.ports}


def _acs_redirect_bridges(pci: PciDevices) -> list[str]:
    return [d.address for d in pci.devices if d.is_bridge and d.acs_redirects]
