"""A health report as JSON (``-o json``, ``--save``) and read back (``health compare``)."""

from __future__ import annotations

from typing import Any

from clusterctl.findings import FINDINGS_SCHEMA_VERSION, Finding, count_by_severity
from clusterctl.health import xid_catalog
from clusterctl.health.model import HealthReport, HostHealth, Verdict
from clusterctl.json_input import matching, read_json, versioned

#: 2: hosts carry ``facts.ib_links``, ``facts.dcgm``, NVLink speeds, and (``health read``) ``readings``.
#: Version 1 reports are still read (``health compare`` of an older saved run).
SCHEMA_VERSION = 2
READABLE_VERSIONS = (1, 2)
KIND = "clusterctl.health"


def report_to_json(report: HealthReport) -> dict[str, Any]:
    return {
        "schema_version": SCHEMA_VERSION,
        "kind": KIND,
        "findings_schema_version": FINDINGS_SCHEMA_VERSION,
        "source": report.source,
        "generated_at": report.generated_at,
        "inventory": report.inventory,
        "level": report.level,
        "since": report.since,
        "xid_catalog": {"source": xid_catalog.CATALOG_SOURCE, "version": xid_catalog.CATALOG_VERSION},
        "summary": {"hosts": len(report.hosts), **report.counts(), **count_by_severity(report.findings)},
        "hosts": [h.to_json() for h in report.hosts],
        "findings": [f.to_json() for f in report.findings],
    }


_TEXT, _OBJECT = {"type": ["string", "null"]}, {"type": ["object", "null"]}
_COUNTERS, _LINK = {**_OBJECT, "additionalProperties": _OBJECT}, {"type": ["integer", "string"]}


def _objects(each: dict[str, Any]) -> dict[str, Any]:  # JSON Schema: an object whose values are objects like each
    return {**_OBJECT, "additionalProperties": {"type": "object", **each}}


_FINDING = {"type": "object", "required": ["severity", "code", "message"], "properties": {
    "severity": {"enum": ["error", "warning", "info"]}, "code": {"type": "string"}, "message": {"type": "string"},
    "host": _TEXT, "subject": _TEXT, "file": _TEXT, "line": {"type": ["integer", "null"]}, "fix": _TEXT,
    "evidence": _OBJECT}}
#: What this clusterctl reads of a saved report (``health compare`` goes through a host's facts);
#: anything else in it is carried as it is.
SCHEMA = {"type": "object", "properties": {
    "level": {"type": "integer", "minimum": 0, "maximum": 3}, "inventory": _TEXT,
    "hosts": {"type": "array", "items": {"type": "object", "required": ["host", "verdict"], "properties": {
        "host": {"type": "string", "minLength": 1}, "verdict": {"enum": [v.value for v in Verdict]},
        "findings": {"type": "array", "items": _FINDING}, "failure": _TEXT,
        "readings": _OBJECT, "facts": {**_OBJECT, "properties": {
            "gpus": _objects({}), "nvlink_errors": _COUNTERS, "ib_counters": _COUNTERS,
            "kernel_events": _objects({"properties": {"count": {"type": "integer"}}}),
            "nvlink": _objects({"properties": {"inactive": {"type": ["array", "null"], "items": _LINK}}})}}}}}}}


def report_from_json(data: Any) -> HealthReport:
    """The report of a saved one's JSON value; ``BadField`` where it is not one."""
    matching(versioned(data, KIND, READABLE_VERSIONS), SCHEMA)
    hosts = tuple(HostHealth(h["host"], Verdict(h["verdict"]), str(h.get("reason", "")),
                             tuple(Finding.from_json(f) for f in h.get("findings", ())), h.get("failure"),
                             dict(h.get("facts") or {}), dict(h.get("readings") or {})) for h in data.get("hosts", ()))
    return HealthReport(hosts, str(data.get("generated_at", "")), data.get("level", 0), str(data.get("since", "")),
                        data.get("inventory"), source=str(data.get("source", "health")))


def load_report(path: str) -> HealthReport:
    return read_json(path, "health-report", "a clusterctl health report", report_from_json,
                     hint="Save one with 'clusterctl health --save FILE' (or -o json).")
