"""The survey report: what was found, as data, as versioned JSON, and read back from a file.

``report_to_json`` writes the documented shape (``clusterctl/schemas/survey.schema.json``,
docs/survey.md); ``clusterctl.saved_survey`` reads a ``--save``d file back for later commands.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from clusterctl.findings import Finding, count_by_severity, fails
from clusterctl.plain_json import to_plain
from clusterctl.saved_survey import REPORT_KIND, SCHEMA_VERSION
from clusterctl.survey.advice import LayoutAdvice
from clusterctl.survey.checks.host import MadeOnce, SurveyedHost
from clusterctl.survey.checks.nic import fabric_hcas
from clusterctl.survey.topology import SHAPE_WORDS, HostTopology


@dataclass(frozen=True)
class HostReport:
    state: SurveyedHost
    findings: tuple[Finding, ...]

    @property
    def name(self) -> str:
        return self.state.name


@dataclass(frozen=True)
class SurveyReport:
    hosts: tuple[HostReport, ...]
    findings: tuple[Finding, ...]
    generated_at: str
    inventory: str | None = None
    advice: LayoutAdvice | None = None
    #: ``survey`` or ``topo-show``.
    source: str = "survey"

    @property
    def unreachable(self) -> int:
        return sum(1 for h in self.hosts if h.state.facts is None)

    @property
    def ok(self) -> bool:
        """False with error-level findings or unreachable hosts (exit code 1)."""
        return not fails(self.findings) and self.unreachable == 0


# --- to JSON ---------------------------------------------------------------------------


def matrix_to_json(topology: HostTopology) -> dict[str, Any]:
    labels = [d.label for d in topology.matrix.devices]
    cells = topology.links_by_labels
    rows = [[(link.raw if (link := cells.get((a, b))) else "?") for b in labels] for a in labels]
    return {"labels": labels, "rows": rows}


def _gpus_json(state: SurveyedHost) -> list[dict[str, Any]]:
    topology = state.topology
    numa_ids = {d.label: d.gpu_numa_id for d in topology.matrix.devices} if topology else {}
    by_index: dict[int, dict[str, Any]] = {g.index: {
        "index": g.index, "label": g.label, "numa_node": g.numa_node, "cpu_affinity": g.cpu_affinity,
        "gpu_numa_id": numa_ids.get(g.label),
        "nearest_nics": list(g.nearest_nics), "nic_link": g.nic_link,
        "nvlink_peers": [{"gpu": peer, "nvlinks": count} for peer, count in g.nvlink_peers],
    } for g in (topology.gpus if topology else ())}
    for info in state.gpus or ():
        record = by_index.setdefault(info.index, {"index": info.index, "label": f"GPU{info.index}"})
        record.update({
            "name": info.name, "uuid": info.uuid, "pci_bus_id": info.pci_bus_id,
            "memory_total_mib": info.memory_total_mib, "persistence_mode": info.persistence_mode,
            "ecc_mode": info.ecc_mode, "ecc_errors_uncorrected": info.ecc_errors_uncorrected,
            "pcie": {"gen_current": info.pcie_gen_current, "gen_max": info.pcie_gen_max,
                     "width_current": info.pcie_width_current, "width_max": info.pcie_width_max},
            "driver_version": info.driver_version, "power_limit_w": info.power_limit_w,
        })
    # nvidia-smi nvlink -s: each link's state and speed; its GPU's name and UUID where the GPU query gave none.
    for status in (state.facts.nvlink if state.facts else None) or ():
        record = by_index.setdefault(status.gpu_index, {"index": status.gpu_index, "label": f"GPU{status.gpu_index}"})
        record.setdefault("name", status.gpu_name)
        record.setdefault("uuid", status.uuid)
        record["nvlink_links"] = [{"link": lane.link, "active": lane.active, "speed_gbps": lane.speed_gbps}
                                  for lane in status.lanes]
        record["nvlink_all_inactive"] = status.all_inactive
    return [by_index[i] for i in sorted(by_index)]


def _nics_json(state: SurveyedHost) -> list[dict[str, Any]]:
    topology = state.topology
    fabric = fabric_hcas(state)
    records: dict[str, dict[str, Any]] = {n.name: {"name": n.name, "label": n.label, "numa_node": n.numa_node,
                                                  "nearest_gpus": list(n.nearest_gpus), "gpu_link": n.gpu_link}
                                          for n in (topology.nics if topology else ())}
    facts = state.facts

    def record(name: str) -> dict[str, Any]:
        """The NIC's record; a NIC the matrix does not show gets one without placement."""
        return records.setdefault(name, {"name": name, "label": None, "numa_node": None, "nearest_gpus": [],
                                         "gpu_link": None})

    for device in (facts.rdma if facts else None) or ():
        record(device.hca).update({"fw_version": device.fw_version, "node_guid": device.node_guid,
                                   "board_id": device.board_id, "ca_type": device.ca_type,
                                   "ports": [p.to_json() for p in device.ports]})
    addresses = _ipv4(state)
    for dev in (facts.netdev if facts else None) or ():
        if dev.hca is not None:
            record(dev.hca).setdefault("netdevs", []).append({"name": dev.name, "port": dev.port, "up": dev.up,
                                                              "ipv4": list(addresses.get(dev.name, dev.ipv4))})
    for name, found in records.items():
        found["fabric"] = name in fabric
        found.setdefault("ports", [])
        found.setdefault("netdevs", [])
    return list(records.values())


def _ipv4(state: SurveyedHost) -> dict[str, tuple[str, ...]]:
    """Interface -> IPv4 addresses from ``ip -o -4 addr show``; loopback left out."""
    found = (state.facts.ipv4 if state.facts else None) or {}
    return {str(k): tuple(v) for k, v in found.items() if k != "lo"}


def host_to_json(host: HostReport, *, shared: MadeOnce | None = None) -> dict[str, Any]:
    state = host.state
    topology = state.topology
    facts = state.facts
    stack = facts.stack if facts else None
    # Alike hosts print the same outputs and get the same parsed facts and topology objects (``facts.shared``,
    # ``survey.run.states_from_fleet``): the parts made of them are equal, so each is made once and given to
    # every such host (the JSON writer then writes it once per depth). The payload is for writing out, never
    # changed after: parts are shared, not copied. The report holds every object whose id is a key here.
    parts = shared or MadeOnce()
    if facts is not None:
        # What each part is made of (see ``_gpus_json``, ``_nics_json``): equal keys, equal parts.
        gpus_key: tuple[object, ...] = ("gpus", id(topology), id(facts.gpus), id(facts.nvlink))
        nics_key: tuple[object, ...] = ("nics", id(topology), id(facts.rdma), id(facts.netdev),
                                         id(facts.ipv4), state.host.fabric)
    else:
        gpus_key = nics_key = ("unreachable", id(state))
    return {
        "host": state.name,
        "address": state.host.address,
        "rack": state.host.rack,
        "roles": list(state.host.roles),
        "reachable": facts is not None,
        "failure": state.failure,
        "gpu_source": facts.gpu_source if facts else None,
        "shape": topology.shape.value if topology else None,
        "shape_words": SHAPE_WORDS[topology.shape] if topology else None,
        "gpu_count": state.gpu_count,
        "gpu_model": state.gpu_model,
        "gpus": parts.get(gpus_key, lambda: _gpus_json(state)),
        "nvlink_domains": [list(d) for d in topology.nvlink_domains] if topology else [],
        "nics": parts.get(nics_key, lambda: _nics_json(state)),
        # Every interface with an IPv4 address (management, IPoIB, RoCE): NCCL_SOCKET_IFNAME is chosen from these.
        "interfaces": [{"name": name, "ipv4": list(found)} for name, found in _ipv4(state).items()],
        "stack": parts.get(("stack", id(stack)), lambda: to_plain(stack)) if stack else None,
        "matrix": parts.get(("matrix", id(topology)), lambda: matrix_to_json(topology)) if topology else None,
        "missing": [{"fact": m.fact, "reason": m.reason} for m in (facts.missing if facts else ())],
        # What a parser could not read of a fact it read in part (line numbers of the tool's output).
        "parse_warnings": [{"fact": fact, **w.to_json()} for fact, found in (facts.warnings if facts else {}).items()
                           for w in found],
        "findings": [f.to_json() for f in host.findings],
    }


def report_to_json(report: SurveyReport) -> dict[str, Any]:
    shared = MadeOnce()
    counts = count_by_severity(report.findings)
    return {
        "schema_version": SCHEMA_VERSION,
        "kind": REPORT_KIND,
        "source": report.source,
        "generated_at": report.generated_at,
        "inventory": report.inventory,
        "summary": {
            "hosts": len(report.hosts),
            "reachable": len(report.hosts) - report.unreachable,
            "unreachable": report.unreachable,
            "errors": counts["error"],
            "warnings": counts["warning"],
            "infos": counts["info"],
            "ok": report.ok,
        },
        "hosts": [host_to_json(h, shared=shared) for h in report.hosts],
        "findings": [f.to_json() for f in report.findings],
        "advice": to_plain(report.advice),
    }
