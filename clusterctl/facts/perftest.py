"""perftest output (``ib_write_bw``, ``ib_write_lat``, ``ib_read_bw``, ``ib_send_lat``...).

Client and server print the same shape: a banner (``RDMA_Write BW Test``), ``key : value``
settings (``Device``, ``Link type``, ``GID index``), the local/remote address lines, then one
table. Bandwidth tables are ``#bytes #iterations BW peak[Gb/sec] BW average[Gb/sec]
MsgRate[Mpps]``, and ``CPU_Util[%]`` with ``--cpu_util`` (``[MB/sec]`` without ``--report_gbits``;
perftest's MB is 2^20 bytes, and perftest 4.5-0.20 and later print it honestly as ``[MiB/sec]``, the same unit);
latency tables are ``#bytes #iterations t_min[usec] t_max[usec] t_typical[usec]`` and, in
newer versions, ``t_avg``, ``t_stdev``, ``99% percentile`` and ``99.9% percentile``.

A paste may lose the ``#`` of ``#iterations`` and the rules around the table; the header is
known by its words. Newer banners add ``Lock-free``, ``Using Enhanced Reorder`` and ``CQE Poll Batch`` fields; they
are settings like the others and are read past. Pasted logs are pre-cleaned
(``clusterctl.facts.clean``: prompts, fences, borders); a table row that cannot be read costs
that row, with a warning naming its line, not the run.

Real logs interleave other lines (``Conflicting CPU frequency values detected``, libibverbs
warnings) and, on failure, end early with messages such as ``Couldn't connect to
HOST:PORT`` or ``IB device mlx5_9 not found``: those are kept as ``errors`` and the result
has no rows, so callers can tell a failed test from a slow one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from clusterctl.errors import ParseError
from clusterctl.facts.clean import clean, without_mpi_tags
from clusterctl.facts.model import ParseResult, ParseWarning

_WHAT = "perftest output"

#: perftest's "MB/sec" (and "MiB/sec" in newer versions) is bytes per second / 2^20. Gb/s is 10^9 bit/s.
MIB_PER_S_TO_GBPS = 1048576 * 8 / 1e9

_BANNER = re.compile(r"^\s*((?:RDMA_Write|RDMA_Read|Send|Atomic\w*)(?: [\w/]+)*? (?:BW|Latency) Test)\s*$")
_BW_HEADER = re.compile(
    r"#bytes\s+#?iterations\s+BW[ _]peak\[(Gb|MB|MiB)/sec\]\s+BW[ _]average\[(Gb|MB|MiB)/sec\]", re.IGNORECASE
)
_CPU_UTIL = re.compile(r"\bCPU_Util\[%\]", re.IGNORECASE)
_LAT_HEADER = re.compile(r"#bytes\s+#?iterations\s+t_min\[usec\]")
_LAT_COLUMNS = re.compile(r"t_min|t_max|t_typical|t_avg|t_stdev|99\.9% percentile|99% percentile")
_SETTING = {
    "device": re.compile(r"\bDevice\s*:\s*(\S+)"),
    "link_type": re.compile(r"\bLink type\s*:\s*(\S+)"),
    "gid_index": re.compile(r"\bGID index\s*:\s*(\d+)"),
    "qps": re.compile(r"\bNumber of qps\s*:\s*(\d+)"),
}
#: One ``Name : value`` pair of the banner (``Dual-port       : OFF          Device         : mlx5_0``):
#: pairs are apart by a tab or two spaces; a value is one word or words apart by single spaces.
_BANNER_PAIR = re.compile(r"([A-Za-z][\w .*/-]*?)\s*:\s*(\S+(?: \S+)*)")
_RULE = re.compile(r"^\s*-{20,}\s*$")
_NUMBER_START = re.compile(r"^\s*\d")
#: Lines perftest (or the libraries under it) prints that say the test did not run: ``Couldn't connect
#: to HOST:PORT``, ``Couldn't get context for the device``, ``Unable to init the socket connection``,
#: ``IB device mlx5_9 not found``, ``No IB devices found``, ``Completion with error``, ``Failed status 12``.
_ERROR = re.compile(r"(?:Couldn't|Unable to|Failed to) \w|\bnot found\b|No IB devices found|Completion with error|"
                    r"Failed status \d")
_TOOL_PREFIX = {"RDMA_Write": "ib_write", "RDMA_Read": "ib_read", "Send": "ib_send", "Atomic": "ib_atomic"}


@dataclass(frozen=True)
class TableRow:
    """The ``#bytes #iterations`` columns every perftest table starts with."""

    size_bytes: int
    iterations: int


@dataclass(frozen=True)
class BandwidthRow(TableRow):
    #: Gb/s (10^9 bit/s), converted from perftest's MiB/s when the log used MB/sec.
    bw_peak_gbps: float
    bw_avg_gbps: float
    msg_rate_mpps: float | None = None
    #: ``CPU_Util[%]`` (``--cpu_util``): the CPU the test used, in percent.
    cpu_util_pct: float | None = None


@dataclass(frozen=True)
class LatencyRow(TableRow):
    t_min_us: float
    t_max_us: float
    t_typical_us: float
    t_avg_us: float | None = None
    t_stdev_us: float | None = None
    p99_us: float | None = None
    p99_9_us: float | None = None


@dataclass(frozen=True)
class PerftestResult(ParseResult):
    """One run's settings and table; ``warnings`` name the table rows that could not be read."""

    #: ``ib_write_bw``, ``ib_read_lat``... from the banner; ``None`` when the log has none.
    test: str | None
    #: ``bw`` or ``lat``, ``None`` when no table was printed.
    kind: str | None
    #: ``server`` when the log shows "Waiting for client to connect", else ``client`` when it
    #: shows a table or an error after a connection attempt, else ``None``.
    side: str | None
    device: str | None = None
    link_type: str | None = None
    gid_index: int | None = None
    qps: int | None = None
    bidirectional: bool = False
    #: Unit the log printed bandwidth in (``Gb/sec``, ``MB/sec`` or ``MiB/sec``); rows are always Gb/s.
    printed_unit: str | None = None
    bandwidth: tuple[BandwidthRow, ...] = ()
    latency: tuple[LatencyRow, ...] = ()
    #: Lines that say the test failed, verbatim (stripped).
    errors: tuple[str, ...] = ()
    #: Every ``Name : value`` of the banner as printed (``TX depth`` -> ``128``, ``Mtu`` -> ``4096[B]``).
    banner_settings: tuple[tuple[str, str], ...] = ()

    @property
    def ok(self) -> bool:
        return not self.errors and bool(self.bandwidth or self.latency)

    @property
    def peak_gbps(self) -> float | None:
        """Highest average bandwidth over the rows (the plateau of a ``-a`` sweep)."""
        return max((r.bw_avg_gbps for r in self.bandwidth), default=None)

    @property
    def typical_latency_us(self) -> float | None:
        """t_typical of the smallest message size: what a latency check compares."""
        row = min(self.latency, key=lambda r: r.size_bytes, default=None)
        return row.t_typical_us if row else None


def _number(token: str, number: int, line: str, *, integer: bool = False) -> float:
    try:
        return int(token) if integer else float(token)
    except ValueError:
        raise ParseError(_WHAT, f"{token!r} is not a number", line=number, text=line) from None


def _test_name(banner: str) -> str:
    first = banner.split()[0]
    prefix = next((v for k, v in _TOOL_PREFIX.items() if first.startswith(k)), "ib_" + first.lower())
    return prefix + ("_lat" if banner.endswith("Latency Test") else "_bw")


def _size_and_iterations(tokens: list[str], number: int, line: str) -> tuple[int, int]:
    return int(_number(tokens[0], number, line, integer=True)), int(_number(tokens[1], number, line, integer=True))


def _bw_row(tokens: list[str], number: int, line: str, scale: float, cpu_util: bool) -> BandwidthRow:
    columns = (6,) if cpu_util else (4, 5)
    if len(tokens) not in columns:
        raise ParseError(_WHAT, f"a bandwidth row has {' or '.join(map(str, columns))} columns under this header, "
                         f"this one has {len(tokens)}", line=number, text=line)
    size, iters = _size_and_iterations(tokens, number, line)
    peak = _number(tokens[2], number, line) * scale
    avg = _number(tokens[3], number, line) * scale
    rate = _number(tokens[4], number, line) if len(tokens) >= 5 else None
    util = _number(tokens[5], number, line) if cpu_util else None
    return BandwidthRow(size, iters, round(peak, 4), round(avg, 4), rate, util)


def _lat_row(tokens: list[str], columns: list[str], number: int, line: str) -> LatencyRow:
    if len(tokens) != 2 + len(columns):
        raise ParseError(_WHAT, f"a latency row needs {2 + len(columns)} columns, this one has {len(tokens)}",
                         line=number, text=line)
    values = {name: _number(tok, number, line) for name, tok in zip(columns, tokens[2:], strict=True)}
    if not {"t_min", "t_max", "t_typical"} <= set(values):
        raise ParseError(_WHAT, "latency table lacks t_min/t_max/t_typical", line=number, text=line)
    size, iters = _size_and_iterations(tokens, number, line)
    return LatencyRow(
        size_bytes=size,
        iterations=iters,
        t_min_us=values["t_min"],
        t_max_us=values["t_max"],
        t_typical_us=values["t_typical"],
        t_avg_us=values.get("t_avg"),
        t_stdev_us=values.get("t_stdev"),
        p99_us=values.get("99% percentile"),
        p99_9_us=values.get("99.9% percentile"),
    )


def parse_perftest(text: str) -> PerftestResult:
    """Parse one perftest run's output (client or server side, any version)."""
    settings: dict[str, str] = {}
    banner: str | None = None
    server = False
    kind: str | None = None
    unit: str | None = None
    scale = 1.0
    cpu_util = False
    lat_columns: list[str] = []
    in_table = False
    bw_rows: list[BandwidthRow] = []
    lat_rows: list[LatencyRow] = []
    errors: list[str] = []
    banner_pairs: list[tuple[str, str]] = []
    lines = (pasted := clean(text)).lines
    warnings = pasted.elision_warnings("lines", "settings and rows there are unknown")
    for cleaned in without_mpi_tags(lines):
        number, line = cleaned.number, cleaned.text
        if "Waiting for client to connect" in line:
            server = True
            continue
        found = _BANNER.match(line)
        if found and banner is None:
            banner = found.group(1)
            continue
        bw_header = _BW_HEADER.search(line)
        if bw_header:
            kind, in_table = "bw", True
            unit = f"{bw_header.group(1)}/sec"
            scale = MIB_PER_S_TO_GBPS if bw_header.group(1).upper() in ("MB", "MIB") else 1.0
            cpu_util = bool(_CPU_UTIL.search(line))
            continue
        if _LAT_HEADER.search(line):
            kind, in_table = "lat", True
            lat_columns = _LAT_COLUMNS.findall(line)
            continue
        if in_table and _RULE.match(line):
            in_table = False
            continue
        if in_table and _NUMBER_START.match(line):
            tokens = line.split()
            try:
                if kind == "bw":
                    bw_rows.append(_bw_row(tokens, number, line, scale, cpu_util))
                else:
                    lat_rows.append(_lat_row(tokens, lat_columns, number, line))
            except ParseError as exc:
                warnings.append(ParseWarning(f"table row not read: {exc.reason}", number))
            continue
        if _ERROR.search(line):
            errors.append(line.strip())
            continue
        if banner is not None and not in_table:
            for key, pattern in _SETTING.items():
                match = pattern.search(line)
                if match and key not in settings:
                    settings[key] = match.group(1)
            if kind is None and not re.match(r"\s*(?:local|remote) address|\s*GID:", line):
                joined = re.sub(r"[ \t]*\t[ \t]*(?=:)", " ", line.strip())  # 'rdma_cm QPs\t : OFF'
                for part in re.split(r"\t+|\s{2,}(?=[A-Za-z][\w .*/-]*?\s*:)", joined):
                    pair = _BANNER_PAIR.fullmatch(part.strip())
                    if pair:
                        banner_pairs.append((pair.group(1).strip(), pair.group(2).strip()))
        # Anything else (warnings, CPU frequency notes, address lines) is commentary.
    if banner is None and kind is None and not errors:
        first = lines[0] if lines else None
        raise ParseError(_WHAT, "no perftest banner, result table or known error message",
                         line=first.number if first else 1, text=first.text if first else "")
    side = "server" if server else ("client" if (bw_rows or lat_rows or errors) else None)
    return PerftestResult(
        test=_test_name(banner) if banner else None,
        kind=kind,
        side=side,
        device=settings.get("device"),
        link_type=settings.get("link_type"),
        gid_index=int(settings["gid_index"]) if "gid_index" in settings else None,
        qps=int(settings["qps"]) if "qps" in settings else None,
        bidirectional=bool(banner and "Bidirectional" in banner),
        printed_unit=unit,
        bandwidth=tuple(bw_rows),
        latency=tuple(lat_rows),
        errors=tuple(errors),
        warnings=tuple(warnings),
        banner_settings=tuple(banner_pairs),
    )
