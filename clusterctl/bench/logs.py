"""``bench report FILE...``: parse perftest and nccl-tests logs people already keep."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from clusterctl.bench.model import bench_finding, judged_rate, latency_over
from clusterctl.bench.nccl_tests import NcclHostRun, judge_nccl
from clusterctl.bench.payload import nccl_record, perftest_record
from clusterctl.bench.plausible import perftest_checks
from clusterctl.errors import ParseError, UsageError
from clusterctl.facts.nccltests import parse_nccl_tests
from clusterctl.facts.perftest import parse_perftest
from clusterctl.findings import Finding, Severity
from clusterctl.inventory.model import Fabric

_NCCL_MARKERS = re.compile(r"Avg bus bandwidth|\bsize\s+count\s+type\s|\bnThread\s+\d+\s+nGpus|_perf(?:_\w+)?\b")


@dataclass(frozen=True)
class LogReport:
    file: str
    record: dict[str, Any]
    findings: tuple[Finding, ...]
    #: Why the file could not be read or parsed (the other files are still reported).
    error: str | None = None


def report_text(name: str, text: str, *, rate_gbps: float | None = None, limits: Fabric = Fabric(),
                fabric: str | None = None, gpus_per_host: int | None = None,
                survey_ports: Mapping[str, Sequence[tuple[str, float]]] | None = None) -> LogReport:
    """One log judged against ``limits`` (a share of ``rate_gbps`` to reach, latency limits): failures, slow links,
    high latency, and figures that cannot be true (``clusterctl.bench.plausible``: above the line rate or NVLink
    limit, or a banner that names another fabric or GPU count than ``fabric`` / ``gpus_per_host``). An nccl-tests
    log is judged by ``judge_nccl`` as ``bench nccl`` judges a run, a multi-node one against its inter-node links
    (``clusterctl.bench.net_capacity``): the NICs its own NCCL INFO lines name, their speed from the log,
    ``rate_gbps`` (each NIC's) or ``survey_ports``."""
    if _NCCL_MARKERS.search(text):
        nccl = parse_nccl_tests(text)
        run = NcclHostRun(name, "", text, nccl, nccl.failure(), host_gpus=gpus_per_host, nic_ports=survey_ports)
        judged, _ = judge_nccl([run], nccl.collective or "", nic_rate_gbps=rate_gbps, about_kind="file")
        return LogReport(name, {"tool": "nccl-tests", **nccl_record(nccl)}, tuple(judged))
    result = parse_perftest(text)
    failure = result.errors[0] if result.errors else None if result.ok or result.side == "server" else (
        "no result table in the output")
    findings = [bench_finding(Severity.ERROR, "PERFTEST_FAILED", name, failure, about_kind="file")] if failure else []
    findings += perftest_checks(result, line_rate_gbps=rate_gbps, fabric_type=fabric, about=name, about_kind="file")
    expected = judged_rate(rate_gbps, result.bidirectional)
    need = limits.within_rack_min
    if expected is not None and result.peak_gbps is not None and result.peak_gbps < expected * need:
        findings.append(bench_finding(Severity.ERROR, "LINK_SLOW", name,
                                      f"peak {result.peak_gbps:.1f} Gb/s is {result.peak_gbps / expected:.0%} of "
                                      f"{expected:g} Gb/s (needs {need:.0%})", about_kind="file"))
    high = latency_over(result.typical_latency_us, limits.latency_warn_us, limits.latency_error_us)
    if high is not None:
        severity, limit = high
        findings.append(bench_finding(severity, "LATENCY_HIGH", name, f"typical latency {result.typical_latency_us} us "
                                      f"> {limit} us", about_kind="file"))
    return LogReport(name, perftest_record(result), tuple(findings))


def report_files(paths: list[str], **kwargs: Any) -> list[LogReport]:
    """A report per file ('-' is standard input); a file that cannot be read or parsed gets its
    ``error`` and the others are still reported."""
    from clusterctl.inputfile import read_text_input

    reports = []
    for path in paths:
        try:
            text, label = read_text_input(path, "benchmark-log")
            reports.append(report_text(label, text, **kwargs))
        except (UsageError, ParseError) as exc:
            reports.append(LogReport(path if path != "-" else "<stdin>", {"tool": None}, (), error=str(exc)))
    return reports
