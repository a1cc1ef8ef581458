"""``bench report FILE...``: parse perftest and nccl-tests logs people already keep."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from clusterctl.bench.model import bench_finding, judged_rate, latency_over
from clusterctl.bench.net_capacity import link_capacity_checks
from clusterctl.bench.plausible import nccl_checks, perftest_checks
from clusterctl.errors import ParseError, UsageError
from clusterctl.facts.nccltests import parse_nccl_tests
from clusterctl.facts.perftest import PerftestResult, parse_perftest
from clusterctl.findings import Finding, Severity
from clusterctl.inventory.model import Fabric
from clusterctl.plain_json import to_plain

_NCCL_MARKERS = re.compile(r"Avg bus bandwidth|\bsize\s+count\s+type\s|\bnThread\s+\d+\s+nGpus|_perf(?:_\w+)?\b")


@dataclass(frozen=True)
class LogReport:
    file: str
    record: dict[str, Any]
    findings: tuple[Finding, ...]
    #: Why the file could not be read or parsed (the other files are still reported).
    error: str | None = None


def _perftest_record(result: PerftestResult) -> dict[str, Any]:
    record: dict[str, Any] = {
        "tool": "perftest", "test": result.test, "side": result.side, "device": result.device,
        "link_type": result.link_type, "gid_index": result.gid_index, "bidirectional": result.bidirectional,
        "printed_unit": result.printed_unit, "errors": list(result.errors),
        "parse_warnings": [w.to_json() for w in result.warnings], "qps": result.qps,
    }
    if result.kind == "bw" or result.bandwidth:
        record["rows"] = [{"size_bytes": r.size_bytes, "iterations": r.iterations, "bw_avg_gbps": r.bw_avg_gbps,
                           "bw_peak_gbps": r.bw_peak_gbps, "msg_rate_mpps": r.msg_rate_mpps}
                          for r in result.bandwidth]
        record["peak_gbps"] = result.peak_gbps
    if result.latency:
        record["latency"] = [{"size_bytes": r.size_bytes, "iterations": r.iterations, "t_min_us": r.t_min_us,
                              "t_max_us": r.t_max_us,
                              "t_typical_us": r.t_typical_us, "t_avg_us": r.t_avg_us, "t_stdev_us": r.t_stdev_us,
                              "p99_us": r.p99_us, "p99_9_us": r.p99_9_us} for r in result.latency]
    # The parser's whole result (every field it read), beside the summary above.
    record["parsed"] = to_plain(result)
    return record


def _network_record(result: Any) -> dict[str, Any] | None:
    """What the log's NCCL INFO lines said about the network, for -o json (``None`` when nothing)."""
    net = result.net
    if net.empty:
        return None
    return {"network": net.network, "nranks": net.nranks, "nnodes": net.nnodes, "channels": net.channels,
            "nics_listed": [{"index": n.index, "name": n.name, "link": n.link, "gbs": n.gbs} for n in net.listed()],
            "nics_used": [n.name for n in net.used_nics()]}


def report_text(name: str, text: str, *, rate_gbps: float | None = None, limits: Fabric = Fabric(),
                fabric: str | None = None, gpus_per_host: int | None = None,
                survey_ports: Mapping[str, Sequence[tuple[str, float]]] | None = None) -> LogReport:
    """One log judged against ``limits`` (a share of ``rate_gbps`` to reach, latency limits): failures, slow
    links, high latency, and figures that cannot be true
    (``clusterctl.bench.plausible``: above the line rate or NVLink limit, or a banner that names
    another fabric or GPU count than ``fabric`` / ``gpus_per_host``). A multi-node nccl-tests log
    is judged against its inter-node links (``clusterctl.bench.net_capacity``): the NICs its own
    NCCL INFO lines name, their speed from the log, ``rate_gbps`` (each NIC's) or ``survey_ports``."""
    findings: list[Finding] = []
    if _NCCL_MARKERS.search(text):
        nccl = parse_nccl_tests(text)
        failure = nccl.failure()
        if failure:
            findings.append(bench_finding(Severity.ERROR, "NCCL_FAILED", name, failure, about_kind="file"))
        findings += nccl_checks(nccl, gpus_per_host=gpus_per_host, about=name, about_kind="file")
        if not failure:
            findings += link_capacity_checks(nccl, about=name, about_kind="file", nic_rate_gbps=rate_gbps,
                                             survey_ports=survey_ports)
        record: dict[str, Any] = {
            "tool": "nccl-tests", "test": nccl.test, "hosts": list(nccl.hosts), "n_gpus": nccl.n_gpus,
            "nccl_version": nccl.nccl_version, "nccl_tests_version": nccl.nccl_tests_version,
            "rows": [{"size_bytes": r.size_bytes, "count": r.count, "type": r.type, "redop": r.redop, "root": r.root,
                      "out_of_place_busbw_gbs": r.out_of_place.busbw_gbs, "in_place_busbw_gbs": r.in_place.busbw_gbs,
                      "out_of_place_algbw_gbs": r.out_of_place.algbw_gbs, "in_place_algbw_gbs": r.in_place.algbw_gbs,
                      "out_of_place_time_us": r.out_of_place.time_us, "in_place_time_us": r.in_place.time_us,
                      "out_of_place_wrong": r.out_of_place.wrong, "in_place_wrong": r.in_place.wrong,
                      "out_of_place_error": r.out_of_place.error, "in_place_error": r.in_place.error}
                     for r in nccl.rows],
            "avg_busbw_gbs": nccl.avg_busbw_gbs, "largest_busbw_gbs": nccl.largest_busbw_gbs,
            "out_of_bounds": nccl.out_of_bounds, "errors": list(nccl.errors),
            "network": _network_record(nccl),
            "parse_warnings": [w.to_json() for w in nccl.warnings],
            # The parser's whole result (every field it read), beside the summary above.
            "parsed": to_plain(nccl),
        }
        return LogReport(name, record, tuple(findings))
    result = parse_perftest(text)
    if result.errors:
        findings.append(bench_finding(Severity.ERROR, "PERFTEST_FAILED", name, result.errors[0], about_kind="file"))
    elif not result.ok and result.side != "server":
        findings.append(bench_finding(Severity.ERROR, "PERFTEST_FAILED", name, "no result table in the output",
                                      about_kind="file"))
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
    return LogReport(name, _perftest_record(result), tuple(findings))


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
