"""The agent's metrics, in the format node-exporter's textfile collector reads (``prometheus-client``).

``clusterctl_node_health_finding{hostname, code, gpu, severity}`` is the number of findings of
that code on that GPU (``gpu=""`` for findings about the host or a NIC) at warning or error level;
no series for a finding that is gone. ``hostname`` is the agent's node, the label bootstrap's
rules and ``remediate serve`` read (a scrape through Kubernetes service discovery adds its own
``node``/``instance``, which would clash). The run's end time and duration, whether every probe
answered and whether the conditions reached the API server come with it, so a stale or blind
agent can be alerted on too.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from clusterctl.findings import Finding, Severity
from clusterctl.health.checks import gpu_index

#: The file in the textfile collector's folder (``--collector.textfile.directory``).
TEXTFILE_NAME = "clusterctl_node_health.prom"


@dataclass(frozen=True)
class RunFigures:
    hostname: str
    #: Unix time the run ended.
    finished_at: float
    duration_s: float
    #: NodeConditions written: 1, failed: 0, not asked (no Kubernetes node): absent.
    conditions_published: bool | None


def gpu_label(finding: Finding) -> str:
    index = gpu_index(finding.subject)
    return "" if index is None else str(index)


def render(findings: Iterable[Finding], figures: RunFigures) -> bytes:
    """The textfile's bytes (``prometheus_client.generate_latest`` of a registry of its own)."""
    from prometheus_client import CollectorRegistry, Gauge, generate_latest

    registry = CollectorRegistry()
    host = figures.hostname
    finding = Gauge("clusterctl_node_health_finding", "Findings of clusterctl's node health agent at warning or "
                    "error level, by code, GPU and severity (clusterctl health's codes)",
                    ["hostname", "code", "gpu", "severity"], registry=registry)
    counts = Counter((f.code, gpu_label(f), f.severity.value) for f in findings
                     if f.severity in (Severity.ERROR, Severity.WARNING))
    for (code, gpu, severity), count in sorted(counts.items()):
        finding.labels(host, code, gpu, severity).set(count)
    Gauge("clusterctl_node_health_last_run_timestamp_seconds", "When the node health agent's last run ended "
          "(Unix time)", ["hostname"], registry=registry).labels(host).set(figures.finished_at)
    Gauge("clusterctl_node_health_last_run_duration_seconds", "How long the node health agent's last run took",
          ["hostname"], registry=registry).labels(host).set(figures.duration_s)
    if figures.conditions_published is not None:
        Gauge("clusterctl_node_health_conditions_published", "1 when the last run wrote its NodeConditions, "
              "0 when the API server could not be reached or refused", ["hostname"],
              registry=registry).labels(host).set(1 if figures.conditions_published else 0)
    return generate_latest(registry)
