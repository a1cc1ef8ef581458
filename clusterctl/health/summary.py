"""The facts of a host's probes that a saved report keeps, for ``health compare``: plain JSON values.

Counters and states keyed by something stable across runs (GPU bus id, ``gpu/link``,
``hca/port``), so two saved runs line up host by host and key by key.
"""

from __future__ import annotations

from typing import Any

from clusterctl.health.probe import HostProbe


def host_facts(probe: HostProbe) -> dict[str, Any]:
    facts: dict[str, Any] = {}
    if probe.smi is not None:
        facts["driver"] = probe.smi.driver_version
        facts["gpus"] = {
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
            for g in probe.smi.gpus
        }
    if probe.kernel is not None:
        xids: dict[str, dict[str, Any]] = {}
        for e in probe.kernel.events:
            key = f"{e.kind}:{e.code if e.code is not None else '-'}@{e.pci or '?'}"
            entry = xids.setdefault(key, {"kind": e.kind, "code": e.code, "pci": e.pci, "count": 0})
            entry["count"] += 1
            entry["last"] = e.text
        facts["kernel_events"] = xids
        facts["kernel_log_source"] = probe.kernel.source
    if probe.nvlink is not None:
        facts["nvlink"] = {str(s.gpu_index): {"active": sum(1 for lane in s.lanes if lane.active),
                                              "inactive": [lane.link for lane in s.lanes if not lane.active],
                                              "speeds_gbps": {str(lane.link): lane.speed_gbps for lane in s.lanes}}
                           for s in probe.nvlink}
    if probe.nvlink_errors is not None:
        facts["nvlink_errors"] = {f"{e.gpu_index}/{e.link}": dict(e.counters) for e in probe.nvlink_errors.links}
    if probe.rdma is not None:
        facts["ib_ports"] = {f"{d.hca}/{p.port}": p.state for d in probe.rdma for p in d.ports}
        # The link of each port: a DDR 20 Gb/s port or one at 10 among 200s is seen here.
        facts["ib_links"] = {f"{d.hca}/{p.port}": {"state": p.state, "phys_state": p.phys_state,
                                                   "link_layer": p.link_layer, "rate_gbps": p.rate_gbps,
                                                   "active_width": p.active_width, "active_speed": p.active_speed}
                             for d in probe.rdma for p in d.ports}
    if probe.ib_counters is not None:
        facts["ib_counters"] = {f"{p.hca}/{p.port}": dict(p.counters) for p in probe.ib_counters.ports}
    if probe.pci is not None:
        facts["acs_redirect_bridges"] = [d.address for d in probe.pci.devices if d.is_bridge and d.acs_redirects]
    if probe.dcgm is not None:
        facts["dcgm_failed"] = [f"{r.test}@GPU{r.gpu}" if r.gpu is not None else r.test for r in probe.dcgm.failed]
        # Every result, Pass, Skip and Warn too: a skipped test must never read as a pass.
        facts["dcgm"] = {"dcgm_version": probe.dcgm.dcgm_version, "driver_version": probe.dcgm.driver_version,
                         "gpu_device_ids": list(probe.dcgm.gpu_device_ids),
                         "results": [{"category": r.category, "test": r.test, "gpu": r.gpu, "status": r.status,
                                      "info": r.info} for r in probe.dcgm.results]}
    if probe.problems:
        facts["problems"] = [{"probe": p.probe, "tool": p.tool, "kind": p.kind, "reason": p.reason}
                             for p in probe.problems]
    return facts
