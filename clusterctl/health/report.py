"""A health report as JSON (``-o json``, ``--save``) and read back (``health compare``)."""

from __future__ import annotations

from typing import Any

from clusterctl.errors import UsageError
from clusterctl.findings import FINDINGS_SCHEMA_VERSION, Finding, count_by_severity
from clusterctl.health import xid_catalog
from clusterctl.health.model import HealthReport, HostHealth, Verdict
from clusterctl.inputfile import read_json_input

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


def report_from_json(data: dict[str, Any], *, name: str = "report") -> HealthReport:
    if not isinstance(data, dict) or data.get("kind") != KIND:
        raise UsageError("not a clusterctl health report (saved with 'clusterctl health --save' or -o json)",
                         file=name)
    if data.get("schema_version") not in READABLE_VERSIONS:
        raise UsageError(f"health report schema version {data.get('schema_version')!r} is not supported "
                         f"(this clusterctl reads {', '.join(map(str, READABLE_VERSIONS))})", file=name)
    try:
        hosts = tuple(
            HostHealth(str(h["host"]), Verdict(h["verdict"]), str(h.get("reason", "")),
                       tuple(Finding.from_json(f) for f in h.get("findings", ())), h.get("failure"),
                       dict(h.get("facts") or {}), dict(h.get("readings") or {}))
            for h in data.get("hosts", ())
        )
    except (KeyError, ValueError, TypeError) as exc:
        raise UsageError(f"health report is damaged: {exc}", file=name) from exc
    return HealthReport(hosts, str(data.get("generated_at", "")), int(data.get("level", 0)),
                        str(data.get("since", "")), data.get("inventory"), source=str(data.get("source", "health")))


def load_report(path: str) -> HealthReport:
    data, name = read_json_input(path, "health-report", "a health report")
    return report_from_json(data, name=name)
