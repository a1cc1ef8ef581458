"""``bench report FILE...``: parse perftest and nccl-tests logs people already keep."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from clusterctl.bench.judge import judge_link, saved_link
from clusterctl.bench.nccl_tests import NcclHostRun, judge_nccl
from clusterctl.bench.payload import nccl_record, perftest_record
from clusterctl.errors import ParseError, UsageError
from clusterctl.facts.nccltests import looks_like_nccl_tests, parse_nccl_tests
from clusterctl.facts.perftest import parse_perftest
from clusterctl.facts.rdma import link_rate
from clusterctl.findings import Finding
from clusterctl.inputfile import read_text_input
from clusterctl.inventory.model import Fabric
from clusterctl.saved_survey import load_saved_survey


@dataclass(frozen=True)
class LogReport:
    file: str
    record: dict[str, Any]
    findings: tuple[Finding, ...]
    #: Why the file could not be read or parsed (the other files are still reported).
    error: str | None = None


def report_text(name: str, text: str, *, rate_gbps: float | None = None, limits: Fabric = Fabric(),
                gpus_per_host: int | None = None,
                survey_ports: Mapping[str, Sequence[tuple[str, float]]] | None = None) -> LogReport:
    """One log judged against ``limits`` (a share of ``rate_gbps`` to reach, latency limits, the fabric's type): a
    perftest log by ``judge_link`` as ``bench ib`` judges a link (failed, slow, high latency, figures that cannot
    be true: ``clusterctl.bench.plausible``), a GPU count other than ``gpus_per_host`` a finding. An nccl-tests
    log is judged by ``judge_nccl`` as ``bench nccl`` judges a run, a multi-node one against its inter-node links
    (``clusterctl.bench.net_capacity``): the NICs its own NCCL INFO lines name, their speed from the log,
    ``rate_gbps`` (each NIC's) or ``survey_ports``."""
    if looks_like_nccl_tests(text):
        nccl = parse_nccl_tests(text)
        run = NcclHostRun(name, "", text, nccl, nccl.failure(), host_gpus=gpus_per_host, nic_ports=survey_ports)
        judged, _ = judge_nccl([run], nccl.collective or "", nic_rate_gbps=rate_gbps, about_kind="file")
        return LogReport(name, {"tool": "nccl-tests", **nccl_record(nccl)}, tuple(judged))
    result = parse_perftest(text)
    judged = judge_link(saved_link(result, rate_gbps=rate_gbps, limits=limits), limits, about=name, about_kind="file")
    return LogReport(name, perftest_record(result), tuple(judged))


def saved_survey_ports(path: str) -> dict[str, list[tuple[str, float]]]:
    """Each host's active ports (NIC name, Gb/s) in the saved survey ``path``, of its fabric NICs where the survey
    marks any, else of every NIC: the links a multi-node nccl-tests log is judged against."""
    return {name: [(nic.name, rate) for nic in host.nics if nic.fabric or not any(n.fabric for n in host.nics)
                   for port in nic.ports if (rate := link_rate(port))]
            for name, host in load_saved_survey(path).hosts.items()}


def report_files(paths: list[str], **kwargs: Any) -> list[LogReport]:
    """A report per file ('-' is standard input); a file that cannot be read or parsed gets its
    ``error`` and the others are still reported."""
    reports = []
    for path in paths:
        try:
            text, label = read_text_input(path, "benchmark-log")
            reports.append(report_text(label, text, **kwargs))
        except (UsageError, ParseError) as exc:
            reports.append(LogReport(path if path != "-" else "<stdin>", {"tool": None}, (), error=str(exc)))
    return reports
