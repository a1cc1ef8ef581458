"""The survey report: what was found, as data, as versioned JSON, and read back from a file.

``report_to_json`` writes the documented shape (``clusterctl/schemas/survey.schema.json``,
docs/survey.md); ``load_saved_survey`` reads a ``--save``d file for later commands
(``tune-nccl``, ``bootstrap``) and refuses files of another schema version.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any

from clusterctl.errors import UsageError
from clusterctl.survey.advice import LayoutAdvice
from clusterctl.survey.findings import Finding, HostState, Severity, fabric_hcas
from clusterctl.survey.topology import SHAPE_WORDS, HostTopology

SCHEMA_VERSION = 1
REPORT_KIND = "clusterctl.survey"
SCHEMA_PATH = Path(__file__).resolve().parent.parent / "schemas" / "survey.schema.json"


@dataclass(frozen=True)
class HostReport:
    state: HostState
    findings: tuple[Finding, ...]

    @property
    def name(self) -> str:
        return self.state.name

    def count(self, severity: Severity) -> int:
        return sum(1 for f in self.findings if f.severity is severity)


@dataclass(frozen=True)
class SurveyReport:
    hosts: tuple[HostReport, ...]
    findings: tuple[Finding, ...]
    generated_at: str
    inventory: str | None = None
    advice: LayoutAdvice | None = None
    #: ``survey`` or ``topo-show``.
    source: str = "survey"

    def count(self, severity: Severity) -> int:
        return sum(1 for f in self.findings if f.severity is severity)

    @property
    def unreachable(self) -> int:
        return sum(1 for h in self.hosts if h.state.facts is None)

    @property
    def ok(self) -> bool:
        """False with error-level findings or unreachable hosts (exit code 1)."""
        return self.count(Severity.ERROR) == 0 and self.unreachable == 0


# --- to JSON ---------------------------------------------------------------------------


def finding_to_json(f: Finding) -> dict[str, Any]:
    return {"severity": f.severity.value, "code": f.code, "host": f.host, "message": f.message,
            "evidence": _plain(f.evidence), "hint": f.hint}


def _plain(value: Any) -> Any:
    """JSON-ready copy: tuples as lists, enums as values, keys as strings."""
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [_plain(v) for v in value]
    return value


def matrix_to_json(topology: HostTopology) -> dict[str, Any]:
    labels = [d.label for d in topology.matrix.devices]
    cells = topology.links_by_labels
    rows = [[(link.raw if (link := cells.get((a, b))) else "?") for b in labels] for a in labels]
    return {"labels": labels, "rows": rows}


def _gpus_json(state: HostState) -> list[dict[str, Any]]:
    topology = state.topology
    by_index: dict[int, dict[str, Any]] = {}
    for g in topology.gpus if topology else ():
        by_index[g.index] = {
            "index": g.index, "label": g.label, "numa_node": g.numa_node, "cpu_affinity": g.cpu_affinity,
            "nearest_nics": list(g.nearest_nics), "nic_link": g.nic_link,
            "nvlink_peers": [{"gpu": peer, "nvlinks": count} for peer, count in g.nvlink_peers],
        }
    for info in state.gpus or ():
        record = by_index.setdefault(info.index, {"index": info.index, "label": f"GPU{info.index}"})
        record.update({
            "name": info.name, "uuid": info.uuid, "pci_bus_id": info.pci_bus_id,
            "memory_total_mib": info.memory_total_mib, "persistence_mode": info.persistence_mode,
            "ecc_mode": info.ecc_mode, "ecc_errors_uncorrected": info.ecc_errors_uncorrected,
            "pcie": {"gen_current": info.pcie_gen_current, "gen_max": info.pcie_gen_max,
                     "width_current": info.pcie_width_current, "width_max": info.pcie_width_max},
        })
    return [by_index[i] for i in sorted(by_index)]


def _nics_json(state: HostState) -> list[dict[str, Any]]:
    topology = state.topology
    fabric = fabric_hcas(state)
    records: dict[str, dict[str, Any]] = {}
    for n in topology.nics if topology else ():
        records[n.name] = {"name": n.name, "label": n.label, "numa_node": n.numa_node,
                           "nearest_gpus": list(n.nearest_gpus), "gpu_link": n.gpu_link}
    facts = state.facts
    for device in (facts.rdma if facts else None) or ():
        record = records.setdefault(device.hca, {"name": device.hca, "label": None, "numa_node": None,
                                                 "nearest_gpus": [], "gpu_link": None})
        record["fw_version"] = device.fw_version
        record["ports"] = [
            {"port": p.port, "state": p.state, "phys_state": p.phys_state, "link_layer": p.link_layer,
             "rate_gbps": p.rate_gbps, "active_width": p.active_width, "active_speed": p.active_speed,
             "roce_v2_gid_index": p.roce_v2_gid_index}
            for p in device.ports
        ]
    addresses = _ipv4(state)
    for dev in (facts.netdev if facts else None) or ():
        if dev.hca is None:
            continue
        record = records.setdefault(dev.hca, {"name": dev.hca, "label": None, "numa_node": None,
                                              "nearest_gpus": [], "gpu_link": None})
        record.setdefault("netdevs", []).append({"name": dev.name, "port": dev.port, "up": dev.up,
                                                 "ipv4": list(addresses.get(dev.name, dev.ipv4))})
    for name, record in records.items():
        record["fabric"] = name in fabric
        record.setdefault("ports", [])
        record.setdefault("netdevs", [])
    return list(records.values())


def _ipv4(state: HostState) -> dict[str, tuple[str, ...]]:
    """Interface -> IPv4 addresses from ``ip -o -4 addr show``; loopback left out."""
    found = state.facts.values.get("ipv4") if state.facts else None
    if not isinstance(found, dict):
        return {}
    return {str(k): tuple(v) for k, v in found.items() if k != "lo"}


def host_to_json(host: HostReport, *, with_matrix: bool = True) -> dict[str, Any]:
    state = host.state
    topology = state.topology
    facts = state.facts
    stack = facts.stack if facts else None
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
        "gpus": _gpus_json(state),
        "nvlink_domains": [list(d) for d in topology.nvlink_domains] if topology else [],
        "nics": _nics_json(state),
        # Every interface with an IPv4 address (management, IPoIB, RoCE): NCCL_SOCKET_IFNAME is chosen from these.
        "interfaces": [{"name": name, "ipv4": list(found)} for name, found in _ipv4(state).items()],
        "stack": _plain(asdict(stack)) if stack else None,
        "matrix": matrix_to_json(topology) if topology and with_matrix else None,
        "missing": [{"fact": m.fact, "reason": m.reason} for m in (facts.missing if facts else ())],
        "findings": [finding_to_json(f) for f in host.findings],
    }


def advice_to_json(advice: LayoutAdvice) -> dict[str, Any]:
    return {
        "tp": advice.tp, "pp": advice.pp, "dp": advice.dp, "world_size": advice.world_size, "fits": advice.fits,
        "hosts": [
            {"host": h.host, "rack": h.rack, "gpus": h.gpus, "fit": h.fit, "reason": h.reason,
             "tp_groups": [list(g) for g in h.tp_groups],
             "rank_nics": [{"local_rank": r.local_rank, "gpu": r.gpu, "nic": r.nic, "link": r.link}
                           for r in h.rank_nics]}
            for h in advice.hosts
        ],
        "placements": [
            {"dp_rank": p.dp_rank, "pp_stage": p.pp_stage, "host": p.host, "rack": p.rack, "gpus": list(p.gpus),
             "first_global_rank": p.first_global_rank}
            for p in advice.placements
        ],
        "explanation": list(advice.explanation),
    }


def report_to_json(report: SurveyReport) -> dict[str, Any]:
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
            "errors": report.count(Severity.ERROR),
            "warnings": report.count(Severity.WARNING),
            "infos": report.count(Severity.INFO),
            "ok": report.ok,
        },
        "hosts": [host_to_json(h) for h in report.hosts],
        "findings": [finding_to_json(f) for f in report.findings],
        "advice": advice_to_json(report.advice) if report.advice else None,
    }


def load_schema() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(SCHEMA_PATH.read_text())
    return data


def validate_report_json(data: Any) -> None:
    """Raise ``UsageError`` naming the first place where ``data`` breaks the schema."""
    import jsonschema

    validator = jsonschema.Draft202012Validator(load_schema())
    error = next(iter(sorted(validator.iter_errors(data), key=lambda e: list(e.absolute_path))), None)
    if error is not None:
        where = "/".join(str(p) for p in error.absolute_path) or "(top level)"
        raise UsageError(f"survey report does not match schema version {SCHEMA_VERSION}: at {where}: {error.message}")


# --- reading a saved report back -------------------------------------------------------


@dataclass(frozen=True)
class SavedGPU:
    index: int
    name: str | None
    numa_node: str | None
    nearest_nics: tuple[str, ...]
    nic_link: str | None


@dataclass(frozen=True)
class SavedPort:
    port: int
    state: str
    link_layer: str
    rate_gbps: float | None
    roce_v2_gid_index: int | None


@dataclass(frozen=True)
class SavedNIC:
    name: str
    numa_node: str | None
    nearest_gpus: tuple[int, ...]
    #: True for NICs that carry GPU traffic (inventory's HCA list, else NICs near GPUs).
    fabric: bool
    ports: tuple[SavedPort, ...]

    @property
    def up(self) -> bool:
        return any(p.state == "PORT_ACTIVE" for p in self.ports)


@dataclass(frozen=True)
class SavedHost:
    name: str
    rack: str | None
    reachable: bool
    shape: str | None
    gpu_count: int | None
    gpu_model: str | None
    nvlink_domains: tuple[tuple[int, ...], ...]
    gpus: tuple[SavedGPU, ...]
    nics: tuple[SavedNIC, ...]
    stack: dict[str, Any] | None
    findings: tuple[Finding, ...]


@dataclass(frozen=True)
class SavedSurvey:
    generated_at: str
    inventory: str | None
    hosts: dict[str, SavedHost]
    findings: tuple[Finding, ...]
    #: The whole JSON document, for fields not lifted into the classes above.
    raw: dict[str, Any] = field(repr=False, default_factory=dict)


def _finding_from_json(data: dict[str, Any]) -> Finding:
    return Finding(Severity(data["severity"]), data["code"], data["host"], data["message"],
                   dict(data.get("evidence") or {}), data.get("hint", ""))


def _host_from_json(data: dict[str, Any]) -> SavedHost:
    return SavedHost(
        name=data["host"],
        rack=data.get("rack"),
        reachable=data["reachable"],
        shape=data.get("shape"),
        gpu_count=data.get("gpu_count"),
        gpu_model=data.get("gpu_model"),
        nvlink_domains=tuple(tuple(d) for d in data.get("nvlink_domains", [])),
        gpus=tuple(SavedGPU(g["index"], g.get("name"), g.get("numa_node"), tuple(g.get("nearest_nics", [])),
                            g.get("nic_link")) for g in data.get("gpus", [])),
        nics=tuple(
            SavedNIC(n["name"], n.get("numa_node"), tuple(n.get("nearest_gpus", [])), bool(n.get("fabric")),
                     tuple(SavedPort(p["port"], p["state"], p["link_layer"], p.get("rate_gbps"),
                                     p.get("roce_v2_gid_index")) for p in n.get("ports", [])))
            for n in data.get("nics", [])
        ),
        stack=data.get("stack"),
        findings=tuple(_finding_from_json(f) for f in data.get("findings", [])),
    )


def load_saved_survey(path: str | Path) -> SavedSurvey:
    """Read a report written by ``clusterctl survey --save FILE``.

    Raises ``UsageError`` (exit 2) when the file is unreadable, not JSON, of another schema
    version, or not shaped as documented.
    """
    where = str(path)
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise UsageError(f"cannot read the saved survey ({exc.strerror})", file=where) from exc
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(f"not JSON: {exc.msg}", file=where, line=exc.lineno) from exc
    if not isinstance(data, dict) or data.get("kind") != REPORT_KIND:
        raise UsageError("not a clusterctl survey report (run clusterctl survey --save FILE)", file=where)
    if data.get("schema_version") != SCHEMA_VERSION:
        raise UsageError(
            f"survey schema version {data.get('schema_version')!r}; this clusterctl reads version {SCHEMA_VERSION}",
            file=where, hint="Run the survey again with this clusterctl.",
        )
    try:
        validate_report_json(data)
    except UsageError as exc:
        raise UsageError(exc.message, file=where) from exc
    hosts = {h["host"]: _host_from_json(h) for h in data["hosts"]}
    return SavedSurvey(data["generated_at"], data.get("inventory"), hosts,
                       tuple(_finding_from_json(f) for f in data["findings"]), data)

