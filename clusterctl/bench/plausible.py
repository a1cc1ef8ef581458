"""Figures that cannot be true, and recordings that describe another machine.

A measurement above what the link or the GPUs can physically carry is not a fast result: it is
a wrong unit, a bidirectional run read as one direction, or a log of some other machine. The
same goes for a log whose own banner contradicts the inventory (``Link type: Ethernet`` on an
InfiniBand fabric, 4 ranks on a host that has 8 GPUs). These checks say so instead of "ok".

Limits, per direction:

- a perftest bandwidth is at most the port's line rate, twice that for a bidirectional run
  (``-b``: perftest adds both directions);
- an nccl-tests bus bandwidth on one host is at most the NVLink bandwidth of one GPU: the sum of
  its links as ``nvidia-smi nvlink -s`` reports them (A100: 12 x 25 GB/s; H100/H200: 18 x
  26.562 GB/s; B200/B300: 18 x 53.125 GB/s). NVLink SHARP (NVLS) gets close to that limit,
  never above it; a small margin absorbs rounding.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from clusterctl.bench.model import bench_finding, judged_rate
from clusterctl.facts.model import NVLinkStatus
from clusterctl.facts.nccltests import NcclTestResult
from clusterctl.facts.perftest import MIB_PER_S_TO_GBPS, PerftestResult
from clusterctl.findings import Finding, Severity
from clusterctl.terminal_text import one_line

FIGURE_IMPOSSIBLE = "FIGURE_IMPOSSIBLE"
FIGURE_INCONSISTENT = "FIGURE_INCONSISTENT"
#: perftest computes MsgRate from the average: the two agree to rounding on every real row (10%, and half
#: the last of the two decimals it prints: a 4-byte row's 0.0068 Gb/s is printed 0.01).
CONSISTENCY_TOLERANCE = 0.10
PRINTED_HALF_DIGIT = 0.005
RECORDING_MISMATCH = "RECORDING_MISMATCH"
NCCL_NOT_VALIDATED = "NCCL_NOT_VALIDATED"
NCCL_WARNED = "NCCL_WARNED"
#: Printed figures are rounded; a hair above a limit is rounding, not physics.
ROUNDING_MARGIN = 1.01
#: One GPU's NVLink bandwidth per direction (GB/s): links x per-link speed as nvidia-smi nvlink -s prints it.
NVLINK_GBS_PER_GPU: tuple[tuple[str, float, str], ...] = (
    ("B300", 18 * 53.125, "18 NVLink5 links x 53.125 GB/s"),
    ("B200", 18 * 53.125, "18 NVLink5 links x 53.125 GB/s"),
    ("H200", 18 * 26.562, "18 NVLink4 links x 26.562 GB/s"),
    ("H100", 18 * 26.562, "18 NVLink4 links x 26.562 GB/s"),
    ("H800", 8 * 26.562, "8 NVLink4 links x 26.562 GB/s"),
    ("A100", 12 * 25.0, "12 NVLink3 links x 25 GB/s"),
    ("A800", 8 * 25.0, "8 NVLink3 links x 25 GB/s"),
)
#: What a GPU without an active NVLink can move per direction: PCIe Gen5 x16 (a Gen4 link gives half).
PCIE_GBS_PER_GPU = 64.0
#: Fabric type in the inventory -> the ``Link type`` perftest prints for it.
_LINK_TYPE = {"ib": "IB", "roce": "Ethernet", "ethernet": "Ethernet"}
_FABRIC_WORDS = {"ib": "InfiniBand", "roce": "RoCE (Ethernet)", "ethernet": "Ethernet"}


def bandwidth_check(figure: float | None, *, line_rate_gbps: float | None, bidirectional: bool, test: str | None,
                    about: str, about_kind: str = "subject", printed_unit: str | None = None) -> list[Finding]:
    """A perftest bandwidth above the line rate (twice it for a bidirectional run) cannot be true."""
    limit = judged_rate(line_rate_gbps, bidirectional)
    if figure is None or limit is None or figure <= limit * ROUNDING_MARGIN:
        return []
    mode = f"a bidirectional run on a {line_rate_gbps:g} Gb/s link" if bidirectional else \
        f"one direction of a {line_rate_gbps:g} Gb/s link"
    return [bench_finding(
        Severity.ERROR, FIGURE_IMPOSSIBLE, about,
        f"{test or 'perftest'} average {figure:.1f} Gb/s is above the {limit:g} Gb/s that {mode} can carry: this "
        "figure cannot be a measurement of this link",
        about_kind=about_kind, fix="Check the units (MB/sec and MiB/sec are 2^20 bytes/s), bidirectional mode (-b adds "
        "both directions), and that the recording is of this link.",
        measured_gbps=figure, limit_gbps=limit, bidirectional=bidirectional, printed_unit=printed_unit)]


def link_type_check(link_type: str | None, *, fabric_type: str | None, about: str,
                    about_kind: str = "subject") -> list[Finding]:
    """A perftest banner whose ``Link type`` is not the inventory's fabric was measured elsewhere."""
    expected = _LINK_TYPE.get(fabric_type or "")
    if not expected or not link_type or link_type == expected:
        return []
    return [bench_finding(
        Severity.WARNING, RECORDING_MISMATCH, about,
        f"the recording's banner says 'Link type : {link_type}' but the inventory's fabric is "
        f"{_FABRIC_WORDS[fabric_type or '']}: it was not measured on this fabric",
        about_kind=about_kind,
        fix="Check the fabric type in the inventory, or that the test ran over the intended HCA (-d) and port.",
        link_type=link_type, fabric=fabric_type)]


def consistency_checks(result: PerftestResult, *, about: str, about_kind: str = "subject") -> list[Finding]:
    """Rows whose figures contradict each other: the average is MsgRate x message size, so a row whose
    printed average matches that product in Gb/s under a MB/sec header was printed in another unit than
    the header says; a peak of 0.00 beside a non-zero average is no measurement of the peak, and inconsistent
    unless the log shows the mode that prints it so (``PerftestResult.peak_unmeasured_by``)."""
    found: list[Finding] = []
    mislabelled, contradicting, zero_peak = [], [], []
    per_mb = result.printed_unit is not None and result.printed_unit.upper() in ("MB/SEC", "MIB/SEC")
    for row in result.bandwidth:
        if row.bw_peak_gbps == 0 and row.bw_avg_gbps > 0:
            zero_peak.append(row)
        if not row.msg_rate_mpps or row.bw_avg_gbps <= 0:
            continue
        from_rate = row.msg_rate_mpps * row.size_bytes * 8 / 1000  # Gb/s
        if abs(row.bw_avg_gbps - from_rate) <= from_rate * CONSISTENCY_TOLERANCE + PRINTED_HALF_DIGIT:
            continue
        printed = row.bw_avg_gbps / MIB_PER_S_TO_GBPS if per_mb else row.bw_avg_gbps
        if per_mb and abs(printed - from_rate) <= from_rate * CONSISTENCY_TOLERANCE:
            mislabelled.append((row, printed, from_rate))
        else:
            contradicting.append((row, from_rate))

    def inconsistent(severity: Severity, message: str, fix: str, **evidence: Any) -> None:
        found.append(bench_finding(severity, FIGURE_INCONSISTENT, about, message, about_kind=about_kind, fix=fix,
                                   **evidence))

    test = result.test or "perftest"
    if mislabelled:
        row, printed, from_rate = mislabelled[0]
        inconsistent(
            Severity.ERROR,
            f"{test}: the header says {result.printed_unit} but MsgRate x size gives the printed figures in Gb/s "
            f"({row.size_bytes} B x {row.msg_rate_mpps} Mpps = {from_rate:.2f} Gb/s, printed {printed:.2f}) on "
            f"{len(mislabelled)} row(s): the bandwidth cannot be read in the header's unit",
            "Re-run with --report_gbits (or without it) so the header and the figures agree; do not compare these "
            "figures with a line rate.",
            printed_unit=result.printed_unit, size_bytes=row.size_bytes, msg_rate_mpps=row.msg_rate_mpps,
            printed_average=printed, gbps_from_msg_rate=round(from_rate, 4))
    if contradicting:
        row, from_rate = contradicting[0]
        inconsistent(
            Severity.ERROR,
            f"{test}: average {row.bw_avg_gbps:g} Gb/s at {row.size_bytes} B but MsgRate {row.msg_rate_mpps} Mpps x "
            f"size is {from_rate:.2f} Gb/s ({len(contradicting)} row(s)): the figures contradict each other",
            "Check that the log is one run's unedited output; re-run the test.",
            size_bytes=row.size_bytes, average_gbps=row.bw_avg_gbps, gbps_from_msg_rate=round(from_rate, 4))
    if zero_peak and result.peak_unmeasured_by is None:
        row = zero_peak[0]
        inconsistent(Severity.WARNING, f"{test}: peak 0.00 beside an average of {row.bw_avg_gbps:g} Gb/s at "
                     f"{row.size_bytes} B ({len(zero_peak)} row(s)), and the log's header shows no mode that prints "
                     "it so (duration -D, --post_list, --noPeak): the peak is not a measurement; only the average "
                     "is judged", "Judge the average; keep the command line and banner with the log.",
                     size_bytes=row.size_bytes, average_gbps=row.bw_avg_gbps)
    return found


def every_gpu_is(result: NcclTestResult, model: str) -> bool:
    """Whether the log names GPUs and every one of them is ``model`` (``H100`` in ``NVIDIA H100 80GB HBM3``)."""
    names = {name for _, _, _, name in result.ranks}
    return bool(names) and all(model in name for name in names)


def nccl_checks(result: NcclTestResult, *, gpus_per_host: int | None, about: str, about_kind: str = "host",
                nvlinks: tuple[NVLinkStatus, ...] | None = None) -> list[Finding]:
    """A single-host bus bandwidth above one GPU's NVLink bandwidth, else above what the host's NVLinks as they are
    now (``nvlinks``; ``None``: not read) let it give; fewer ranks than the host has GPUs; a run that checked no
    result (``-c 0``), whose ``#wrong`` column proves nothing; a finished run NCCL warned in."""
    found: list[Finding] = []
    if result.validation == 0 and result.rows:
        found.append(bench_finding(
            Severity.WARNING, NCCL_NOT_VALIDATED, about,
            f"{result.test or 'nccl-tests'} ran with validation off ('validation: 0', -c 0): its results were not "
            "checked, so no #wrong figure says the data arrived intact",
            about_kind=about_kind, fix="Run it again without -c 0 (or with -c 1) to check correctness too.",
            validation=0))
    if result.nccl_warnings and result.avg_busbw_gbs is not None:
        # A finished run's warnings (a NET/IB port error, a transport fallback) may explain slow figures.
        count = len(result.nccl_warnings)
        found.append(bench_finding(
            Severity.WARNING, NCCL_WARNED, about,
            f"NCCL warned {count} time{'s' if count > 1 else ''} in a run that finished; the first: "
            f"{one_line(result.nccl_warnings[0])}",
            about_kind=about_kind, fix="Read the warnings (nccl_warnings in -o json): a network transport that "
            "failed to open or a fallback makes the figures slower than the fabric allows.", warnings=count))
    hosts = Counter(host for _, host, _, _ in result.ranks)
    # Above the GPUs' NVLinks (their model's, else the host's as they are now): no measurement of this host.
    figure = result.peak_busbw_gbs if len(hosts) <= 1 else None
    # One GPU's NVLink bandwidth per direction for the GPUs the log names, when all are one known model.
    model = next(((gbs, f"{name}: {basis}") for name, gbs, basis in NVLINK_GBS_PER_GPU if every_gpu_is(result, name)),
                 None)
    now = topology_limit(nvlinks or ())
    limit: float | None = None
    if figure is not None and model and figure > model[0] * ROUNDING_MARGIN:
        limit, why = model[0], (f"above the {model[0]:.0f} GB/s one GPU's NVLinks carry per direction ({model[1]}): "
                                "this figure cannot be a measurement of this host")
        fix = "Check that the log is of this host and GPU model, and the units (nccl-tests prints GB/s, 10^9 bytes)."
    elif figure is not None and now and figure > now[0] * ROUNDING_MARGIN:
        limit, why = now[0], f"above what this host's topology can give: {now[1]}"
        fix = ("Look at the host's NVLinks (clusterctl survey; nvidia-smi nvlink -s and -e): a GPU that lost them "
               "needs a reset or service. This figure is not a measurement of the host as it is now.")
    if limit is not None:
        found.append(bench_finding(Severity.ERROR, FIGURE_IMPOSSIBLE, about, f"{result.test or 'nccl-tests'} bus "
                                   f"bandwidth {figure:.1f} GB/s is {why}", about_kind=about_kind, fix=fix,
                                   measured_gbs=figure, limit_gbs=round(limit, 1)))
    if gpus_per_host and hosts:
        # Behind the author's '...' a host may have more ranks than the paste shows, never fewer.
        short = {host: count for host, count in hosts.items()
                 if count > gpus_per_host or (count < gpus_per_host and not result.elided)}
        if short:
            host, count = sorted(short.items())[0]
            found.append(bench_finding(
                Severity.WARNING, RECORDING_MISMATCH, about,
                f"the log has {count} rank(s) on {host} where the host has {gpus_per_host} GPUs: it measured "
                f"{'part of the' if count < gpus_per_host else 'another'} machine",
                about_kind=about_kind, fix="Run with -g <GPUs per host> (or one rank per GPU under mpirun), or check "
                "that the log is of this host.", ranks=dict(sorted(hosts.items())), gpus_per_host=gpus_per_host))
    return found


def topology_limit(statuses: tuple[NVLinkStatus, ...]) -> tuple[float, str] | None:
    """What the host's NVLinks, as ``nvidia-smi nvlink -s`` reports them now, let one GPU move.

    A collective over every GPU goes as fast as its slowest GPU: a GPU whose links are all
    inactive sends over PCIe, so the host cannot reach an NVLink figure whatever its model.
    """
    if not statuses:
        return None
    limits: list[tuple[float, str]] = []
    for status in statuses:
        active = [lane.speed_gbps for lane in status.lanes if lane.active and lane.speed_gbps]
        if active:
            limits.append((sum(active), f"GPU{status.gpu_index} has {len(active)} active NVLink(s), "
                           f"{sum(active):g} GB/s"))
        else:
            limits.append((PCIE_GBS_PER_GPU, f"GPU{status.gpu_index} has no active NVLink (nvidia-smi nvlink -s): "
                           f"its traffic crosses PCIe, at most ~{PCIE_GBS_PER_GPU:g} GB/s per direction"))
    return min(limits)
