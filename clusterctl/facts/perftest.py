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
from clusterctl.facts.table import figure

_WHAT = "perftest output"

#: perftest's "MB/sec" (and "MiB/sec" in newer versions) is bytes per second / 2^20. Gb/s is 10^9 bit/s.
MIB_PER_S_TO_GBPS = 1048576 * 8 / 1e9

_BANNER = re.compile(r"^\s*((?:RDMA_Write|RDMA_Read|Send|Atomic\w*)(?: [\w/]+)*? (?:BW|Latency) Test)\s*$")
_BW_HEADER = re.compile(
    r"#bytes\s+#?iterations\s+BW[ _]peak\[(Gb|MB|MiB)/sec\]\s+BW[ _]average\[(Gb|MB|MiB)/sec\]", re.IGNORECASE
)
_CPU_UTIL = re.compile(r"\bCPU_Util\[%\]", re.IGNORECASE)
_LAT_HEADER = re.compile(r"#bytes\s+#?iterations\s+t_min\[usec\]")
#: Latency columns as the header names them -> ``LatencyRow`` fields.
_LAT_FIELDS = {"t_min": "t_min_us", "t_max": "t_max_us", "t_typical": "t_typical_us", "t_avg": "t_avg_us",
               "t_stdev": "t_stdev_us", "99.9% percentile": "p99_9_us", "99% percentile": "p99_us"}
_LAT_COLUMNS = re.compile("|".join(map(re.escape, _LAT_FIELDS)))
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
#: What perftest prints when it refuses its command line, after a line of its own words saying why (``CUDA DMA-BUF
#: cannot be used without CUDA``).
_OPTIONS_REFUSED = "Parser function exited with Error"
_TOOL_PREFIX = {"RDMA_Write": "ib_write", "RDMA_Read": "ib_read", "Send": "ib_send", "Atomic": "ib_atomic"}
#: The command as pasted (``$ ib_write_bw -d mlx5_0 HOST``, ``Client: ib_send_bw ...``, ``numactl -C 1 ib_send_bw``,
#: ``./ib_write_bw``), not a wrapper's prose about it (``--- starting ib_write_bw server ---``): the tool and its
#: arguments (a terminal pane's `│` border may stand before it).
_COMMAND = re.compile(r"(?:^|[$#:│]\s*|\b(?:sudo|numactl|taskset)\b.*\s)(?:\S*/)?"
                      r"(ib_(?:write|read|send|atomic)_(?:bw|lat))(\s.*)?$")
#: perftest's long options that take a value (its getopt table), which may follow as the next word: ``--source_ip
#: 10.0.0.1`` on a server's command line names no server.
_LONG_WITH_VALUE = (
    "port", "ib-dev", "ib-port", "mtu", "size", "iters", "tx-depth", "qp-timeout", "sl", "gid-index",
    "connection", "qp", "vector", "inline_size", "outs", "tos", "hop_limit", "MGID", "rx-depth", "cq-mod",
    "atomic_type", "post_list", "duration", "margin", "source_mac", "dest_mac", "dest_ip", "source_ip",
    "dest_port", "source_port", "ethertype", "limit_bw", "limit_msgrate", "report-counters", "force-link",
    "remote_mac", "local_mac", "remote_ip", "local_ip", "remote_port", "local_port", "pkey_index", "burst_size",
    "typical_pkt_size", "rate_limit", "rate_limit_type", "rate_units", "output", "out_json_file", "latency_gap",
    "flow_label", "retry_count", "payload_file_path", "use_cuda", "use_cuda_bus_id", "cuda_mem_type", "use_musa",
    "use_musa_bus_id", "use_rocm", "use_neuron", "use_hl", "use_mlu", "use_opencl", "opencl_platform_id",
    "use_ib_dm_dmabuf", "gpu_touch", "mmap", "mmap-offset", "dlid", "tclass", "wait_destroy", "flows",
    "flows_burst", "reply_every", "vlan_pcp", "recv_post_list", "aes_block_size", "kek_path", "credentials_path",
    "data_enc_keys_number", "data_enc_key_app_path", "log_dci_streams", "log_active_dci_streams", "congest_type",
    "bind_source_ip", "cqe_poll", "tph_mem", "cpu_id", "ph", "pin_cores", "numa_node",
)
#: An option with its value (``-d mlx5_0``, ``--ib-dev mlx5_0``): every short perftest option takes one but
#: -abCeFghHNORUVvzZP.
_OPTION_VALUE = re.compile(r"(?<!\S)(?:-[^-abCeFghHNORUVvzZP\s]|--(?:" + "|".join(map(re.escape, _LONG_WITH_VALUE))
                           + r"))\s+\S+")
#: What perftest prints when it will not measure the peak: duration mode, --run_infinitely, more than 20000
#: iterations, the server of a one-way send test.
_PEAK_WARNING = "WARNING: BW peak won't be measured in this run."
#: Command-line options after which perftest prints its peak as 0.00: duration mode and ``--noPeak``.
_NO_PEAK_OPTION = re.compile(r"(?:^|\s)(-D\s*\d+|--duration\S*|-N|--noPeak)(?=\s|$)")


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

    #: ``ib_write_bw``, ``ib_read_lat``... from the banner, else the command line; ``None`` when the log has neither.
    test: str | None
    #: ``bw`` or ``lat``, ``None`` when no table was printed.
    kind: str | None
    #: ``server`` or ``client`` from the lines that tell (``Waiting for client to connect``, a command naming the
    #: server, ``TX depth``/``RX depth`` of a one-way test, ``Couldn't connect to``); ``None`` (unknown, with a
    #: warning) when none does, or they disagree.
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
    #: Why the ``BW peak`` column is no measurement (perftest prints 0.00 there), as the log's header shows it:
    #: ``Post List`` (``--post_list``), ``-D 5`` (duration mode; also the ``CPU_Util`` column, printed only then),
    #: ``--noPeak``, perftest's own ``WARNING: BW peak won't be measured`` line; ``None`` when the log shows none.
    peak_unmeasured_by: str | None = None

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


def _test_name(banner: str) -> str:
    first = banner.split()[0]
    prefix = next((v for k, v in _TOOL_PREFIX.items() if first.startswith(k)), "ib_" + first.lower())
    return prefix + ("_lat" if banner.endswith("Latency Test") else "_bw")


def _size_and_iterations(tokens: list[str], number: int, line: str) -> tuple[int, int]:
    return figure(tokens[0], int, _WHAT, number, line), figure(tokens[1], int, _WHAT, number, line)


def _bw_row(tokens: list[str], number: int, line: str, scale: float, cpu_util: bool) -> BandwidthRow:
    columns = (6,) if cpu_util else (4, 5)
    if len(tokens) not in columns:
        raise ParseError(_WHAT, f"a bandwidth row has {' or '.join(map(str, columns))} columns under this header, "
                         f"this one has {len(tokens)}", line=number, text=line)
    size, iters = _size_and_iterations(tokens, number, line)
    # MsgRate when printed, and CPU_Util: the column count was checked against the header above.
    peak, avg, *rate_and_util = (figure(token, float, _WHAT, number, line) for token in tokens[2:])
    return BandwidthRow(size, iters, round(peak * scale, 4), round(avg * scale, 4), *rate_and_util)


def _lat_row(tokens: list[str], columns: list[str], number: int, line: str) -> LatencyRow:
    if len(tokens) != 2 + len(columns):
        raise ParseError(_WHAT, f"a latency row needs {2 + len(columns)} columns, this one has {len(tokens)}",
                         line=number, text=line)
    values = {name: figure(tok, float, _WHAT, number, line) for name, tok in zip(columns, tokens[2:], strict=True)}
    if not {"t_min", "t_max", "t_typical"} <= set(values):
        raise ParseError(_WHAT, "latency table lacks t_min/t_max/t_typical", line=number, text=line)
    size, iters = _size_and_iterations(tokens, number, line)
    return LatencyRow(size, iters, **{_LAT_FIELDS[name]: value for name, value in values.items()})


def _names_a_server(arguments: str) -> bool:
    """Whether a perftest command's arguments name the server to connect to, as only a client's do: a word that is
    neither an option nor an option's value (``ib_write_bw -d mlx5_0 -x 3 10.0.0.2``); a terminal's border (``│``)
    after the command is no name."""
    words = _OPTION_VALUE.sub(" ", arguments).split()
    return any(not word.startswith("-") and not word.isdigit() and any(map(str.isalnum, word)) for word in words)


def parse_perftest(text: str, *, side: str | None = None) -> PerftestResult:
    """Parse one perftest run's output (client or server side, any version). ``side``: the role when the caller
    knows it (clusterctl's own runs); otherwise the lines that tell decide it."""
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
    # The command is on a prompt line clean() took away; it tells the role, and duration mode.
    command_lines = [found for line in text.splitlines() if (found := _COMMAND.search(line.strip()))]
    commands = [found.group(2) or "" for found in command_lines]
    client = any(map(_names_a_server, commands))
    peak_warned = False
    current = ""  # the line read, stripped; ``before``: the one before it, where perftest says why it refuses
    for cleaned in without_mpi_tags(lines):
        number, line = cleaned.number, cleaned.text
        before, current = current, line.strip()
        if _OPTIONS_REFUSED in line:
            if before and before not in errors and not _COMMAND.search(before):
                errors.append(before)
            errors.append(current)
            continue
        if re.search(r"Waiting for client (?:rdma_cm QP )?to connect", line):
            server = True
            continue
        client = client or "Couldn't connect to " in line
        peak_warned = peak_warned or _PEAK_WARNING in line
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
        if banner is not None and kind is None and not re.match(r"\s*(?:local|remote) address|\s*GID:", line):
            joined = re.sub(r"[ \t]*\t[ \t]*(?=:)", " ", line.strip())  # 'rdma_cm QPs\t : OFF'
            for part in re.split(r"\t+|\s{2,}(?=[A-Za-z][\w .*/-]*?\s*:)", joined):
                pair = _BANNER_PAIR.fullmatch(part.strip())
                if pair:
                    banner_pairs.append((pair.group(1).strip(), pair.group(2).strip()))
        # Anything else (warnings, CPU frequency notes, address lines) is commentary.
    # A server that was stopped while waiting for its client printed no banner: a log, with nothing measured.
    if banner is None and kind is None and not errors and not server:
        first = lines[0] if lines else None
        raise ParseError(_WHAT, "no perftest banner, result table or known error message",
                         line=first.number if first else 1, text=first.text if first else "")
    bidirectional = bool(banner and "Bidirectional" in banner)
    named = dict(reversed(banner_pairs))  # the first of a name, as printed
    # A one-way test's banner has TX depth on the client only and RX depth (send tests) on the server only.
    roles = {role for role, shown in (("server", server), ("client", client),
                                      ("client", "TX depth" in named and not bidirectional),
                                      ("server", "RX depth" in named and not bidirectional)) if shown}
    if side is None and len(roles) == 1:
        (side,) = roles
    elif side is None:
        warnings.append(ParseWarning("client or server: unknown, " + (
            "its lines say both" if roles else "no line says (no 'Waiting for client to connect', no command naming "
            "the server, no TX or RX depth of a one-way test)")))
    no_peak = next(filter(None, (_NO_PEAK_OPTION.search(command) for command in commands)), None)
    return PerftestResult(
        test=_test_name(banner) if banner else command_lines[0].group(1) if command_lines else None,
        kind=kind,
        side=side,
        device=named.get("Device"),
        link_type=named.get("Link type"),
        gid_index=int(named["GID index"]) if named.get("GID index", "").isdigit() else None,
        qps=int(named["Number of qps"]) if named.get("Number of qps", "").isdigit() else None,
        bidirectional=bidirectional,
        printed_unit=unit,
        bandwidth=tuple(bw_rows),
        latency=tuple(lat_rows),
        errors=tuple(errors),
        warnings=tuple(warnings),
        banner_settings=tuple(banner_pairs),
        peak_unmeasured_by=("Post List : " + named["Post List"] if "Post List" in named else
                            no_peak.group(1) if no_peak else "CPU_Util column (duration mode)" if cpu_util else
                            _PEAK_WARNING if peak_warned else None),
    )
