"""A saved survey (``clusterctl survey --save FILE``): its schema, and reading it back.

Later commands read what a survey found without surveying again: ``bench ib --survey``
(HCAs and GID indexes), ``nccl lint --survey`` and ``tune-nccl --survey`` (NCCL version,
fabric, NVLink, NIC locality), bootstrap. This module sits below all of them; the survey
writes the shape (``clusterctl.survey.report``), everything else reads it here and refuses
files of another schema version.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clusterctl.facts.model import NetDevice, RDMAPort
from clusterctl.findings import Finding
from clusterctl.json_input import matching, read_json, versioned

#: Written by this clusterctl. 2: findings in the one shape of ``Finding.to_json`` (``fix``, was ``hint``).
SCHEMA_VERSION = 2
#: Read by this clusterctl: version 1 files differ only in the findings' ``hint`` key.
READABLE_VERSIONS = (1, 2)
REPORT_KIND = "clusterctl.survey"
SCHEMA_PATH = Path(__file__).resolve().parent / "schemas" / "survey.schema.json"


def load_schema() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(SCHEMA_PATH.read_text())
    return data


# --- reading a saved report back -------------------------------------------------------


@dataclass(frozen=True)
class SavedGPU:
    index: int
    name: str | None
    numa_node: str | None
    nearest_nics: tuple[str, ...]
    nic_link: str | None


@dataclass(frozen=True)
class SavedNIC:
    name: str
    numa_node: str | None
    nearest_gpus: tuple[int, ...]
    #: True for NICs that carry GPU traffic (inventory's HCA list, else NICs near GPUs).
    fabric: bool
    #: As the survey read them (``RDMAPort.to_json`` wrote them).
    ports: tuple[RDMAPort, ...]
    #: Its row and column in the host's ``matrix``.
    label: str | None = None
    board_id: str | None = None
    ca_type: str | None = None
    netdevs: tuple[NetDevice, ...] = ()


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
    address: str | None = None
    #: Interface -> its IPv4 addresses (``ip -o -4 addr``).
    interfaces: dict[str, tuple[str, ...]] = field(default_factory=dict)
    #: (row label, column label) -> link class of its ``matrix`` (``NV`` for any NVLink count, ``SOC`` as ``SYS``).
    links: dict[tuple[str, str], str] = field(default_factory=dict)

    @property
    def nvlink_groups(self) -> tuple[tuple[int, ...], ...]:
        """The NVLink domains of two or more GPUs: a GPU alone in its domain has no NVLink."""
        return tuple(d for d in self.nvlink_domains if len(d) >= 2)


@dataclass(frozen=True)
class SavedSurvey:
    generated_at: str
    inventory: str | None
    hosts: dict[str, SavedHost]
    findings: tuple[Finding, ...]


def _matrix_links(matrix: dict[str, Any] | None) -> dict[tuple[str, str], str]:
    labels = (matrix or {}).get("labels") or []
    out: dict[tuple[str, str], str] = {}
    for a, row in zip(labels, (matrix or {}).get("rows") or [], strict=False):
        for b, raw in zip(labels, row, strict=False):
            kind = "NV" if raw.startswith("NV") else raw
            out[(a, b)] = "SYS" if kind == "SOC" else kind
    return out


def host_from_json(data: dict[str, Any]) -> SavedHost:
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
                     tuple(RDMAPort(p["port"], p["state"], p.get("phys_state"), p["link_layer"], p.get("rate_gbps"),
                                    p.get("active_width"), p.get("active_speed"), p.get("roce_v2_gid_index"),
                                    tuple((g["index"], g["gid"], g["type"]) for g in p.get("gids", [])))
                           for p in n.get("ports", [])),
                     n.get("label"), n.get("board_id"), n.get("ca_type"),
                     tuple(NetDevice(d["name"], n["name"], d.get("port"), d.get("up"), tuple(d.get("ipv4", [])))
                           for d in n.get("netdevs", [])))
            for n in data.get("nics", [])
        ),
        stack=data.get("stack"),
        findings=tuple(Finding.from_json(f) for f in data.get("findings", [])),
        address=data.get("address"),
        interfaces={i["name"]: tuple(i["ipv4"]) for i in data.get("interfaces", [])},
        links=_matrix_links(data.get("matrix")),
    )


def load_saved_survey(path: str | Path) -> SavedSurvey:
    """Read a report written by ``clusterctl survey --save FILE``.

    Raises ``UsageError`` (exit 2) when the file is unreadable, not JSON, of another schema
    version, or not shaped as documented.
    """
    return read_json(str(path), "survey", "a clusterctl survey report", lambda data: survey_from_json(
        matching(versioned(data, REPORT_KIND, READABLE_VERSIONS), load_schema())),
        hint="Save one with 'clusterctl survey --save FILE'.")


def survey_from_json(data: dict[str, Any]) -> SavedSurvey:
    """A report already in memory (a survey run just now, as ``report_to_json`` shaped it)."""
    hosts = {h["host"]: host_from_json(h) for h in data["hosts"]}
    return SavedSurvey(data["generated_at"], data.get("inventory"), hosts,
                       tuple(Finding.from_json(f) for f in data["findings"]))

