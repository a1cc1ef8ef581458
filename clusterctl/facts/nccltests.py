"""nccl-tests output (``all_reduce_perf``, ``all_gather_perf``, ``alltoall_perf``...).

The table is announced by a ``#  size  count  type  redop  root  time  algbw  busbw  #wrong
time ...`` comment line; its column names say which columns a row has, because they differ
between versions and collectives (old versions print ``error`` as ``0e+00`` instead of
``#wrong``; all_gather has no ``redop``; the first versions had no ``root``). The first
``time algbw busbw #wrong`` group is out-of-place, the second in-place. ``N/A`` cells (in-place
of some collectives) become ``None``. ``-C 1`` prints CPU time in ``cputime`` columns instead of ``time``; ``-I 1``
adds per-iteration ``i_min i_max i_p99 i_cv%`` after each ``#wrong``; ``-S 1`` ends each row with the local time it
finished, a ``timestamp`` column of two words (``2025-11-12 09:41:07``). ``# Avg bus bandwidth : X`` closes the run: a
table without it is a failure, and so is its ``FAILED`` (below 90% of ``NCCL_TESTS_MIN_BW``; ``OK``: above it).

Logs copied from docs or chat often lost the ``#`` at the start of the comment lines (Markdown
renders them as headings): the header, ``Out of bounds`` and ``Avg bus bandwidth`` lines are
recognised by their words, not by the ``#``.

``#wrong`` is printed with ``%g``: past 999999 wrong elements it reads ``1.04858e+06``, which
is exactly the corrupted-data case that matters most, so it is read as a number like any other.
Binaries built with ``NAME_SUFFIX`` (``all_gather_perf_mpi``) keep that name in ``test`` (it is the
binary the user ran; ``collective`` gives ``all_gather``), whatever launcher's rank tag starts its lines. A row cut by
a CUDA or NCCL error printed into it is not a measurement: it is left out with a warning, and
the error counts as the run's failure. Any other unreadable row costs that row, not the run.

Multi-node logs interleave ``host:pid:tid [gpu] NCCL INFO ...`` lines from every rank, and non-MPI builds launched
by ``mpirun`` print one header per process: those lines are skipped, and the launcher's rank tags
(``clean.without_mpi_tags``) are removed. When the ``Using devices`` lines name one rank from two processes
(``Rank 0`` on testgpu1 and on testgpu2), each process ran its own test (a binary built without ``MPI=1`` under
mpirun): every rank is kept, and a warning names the line; the log is finished when each process's table has its
own summary.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field

from clusterctl.errors import ParseError
from clusterctl.facts.clean import Cleaned, clean, without_mpi_tags
from clusterctl.facts.model import ParseResult, ParseWarning
from clusterctl.facts.nccl_info import NcclNetInfo, parse_nccl_info
from clusterctl.facts.table import figure

_WHAT = "nccl-tests output"

#: The table header, by its columns: docs and chat that turn ``# `` lines into headings (or strip
#: them) lose the ``#`` at the start, never the column names.
_HEADER = re.compile(r"^\s*#?\s*size\s+count\s+type\s+(?:redop\s+)?(?:root\s+)?(?:cpu)?time\s+algbw\s+busbw\b")
#: ``OK``/``FAILED``: the run was given ``NCCL_TESTS_MIN_BW``, and the average reached 90% of it or not.
_AVG = re.compile(r"^\s*#?\s*Avg bus bandwidth\s*:\s*(\S+)(?:\s+(OK|FAILED))?")
#: The threshold as the command line or the job script sets it (``NCCL_TESTS_MIN_BW=300 ./all_reduce_perf``, ``-x``).
_MIN_BW = re.compile(r"\bNCCL_TESTS_MIN_BW=['\"]?([^\s'\"]+)")
_OOB = re.compile(r"^\s*#?\s*Out of bounds values\s*:\s*(\d+)\s*(\w+)?")
#: The setup line; its ``validation: 0`` is a run started with ``-c 0`` that checked no result (``#wrong`` says
#: ``N/A``, or ``0`` in some builds: either way nothing was compared).
_SETUP = re.compile(r"^\s*#?\s*nThread\s+(\d+)\s+nGpus\s+(\d+)\s+minBytes\s+(\d+)\s+maxBytes\s+(\d+)"
                    r"(?:.*?\bvalidation:\s*(\d+))?")
_RANK = re.compile(r"^\s*#?\s*Rank\s+(\d+)(?:\s+Group\s+\d+)?(?:\s+Pid\s+(\d+))?\s+on\s+(\S+)\s+device\s+(\d+)\s+"
                   r"\[([^\]]*)\]\s*(.*?)\s*$")
#: The binary's name as built, ``NAME_SUFFIX`` included (``all_reduce_perf_mpi``): the name the user ran.
_TOOL = re.compile(r"\b((?:all_reduce|all_gather|reduce_scatter|alltoall|sendrecv|broadcast|reduce|gather|scatter|"
                   r"hypercube)_perf(?:_[A-Za-z0-9]+)*)\b")
_NCCL_LOG = re.compile(r"\bNCCL (?:INFO|WARN|TRACE)\b")
#: ``NCCL version 2.18.1+cuda12.1``: rank 0's own line, or an ``NCCL INFO`` line with NCCL_DEBUG=INFO.
_NCCL_VERSION = re.compile(r"\bNCCL version (\d+\.\d+\.\d+\S*)")
#: ``# nccl-tests version 2.18.0 nccl-headers=22907 nccl-library=22907`` (nccl-tests 2.14 and later).
_TESTS_VERSION = re.compile(r"^\s*#?\s*nccl-tests version (\S+)")
#: Where a line says a rank failed: ``Test NCCL failure``, ``Test CUDA failure``, ``Cuda failure``,
#: ``Test failure``, ``unhandled system error``, ``NCCL failure``; or warned, ``NCCL WARN`` (which many runs
#: that finish print: ``Failed to open libibverbs.so``, ``Could not find a path ... falling back``).
_FAILURE = re.compile(r"Test (?:NCCL|CUDA) failure|Cuda failure|NCCL WARN|\bTest failure\b|"
                      r"(?i:unhandled (?:system|cuda) error)|NCCL failure")
#: Each half's number columns and the ``Measure`` field each fills (``#wrong`` and ``error`` are read apart).
_MEASURE_FIELDS = {"time": "time_us", "cputime": "cpu_time_us", "algbw": "algbw_gbs", "busbw": "busbw_gbs",
                   "i_min": "iter_min_us", "i_max": "iter_max_us", "i_p99": "iter_p99_us", "i_cv%": "iter_cv_pct"}
_TIMES = ("time", "cputime")
_KNOWN_COLUMNS = {"size", "count", "type", "redop", "root", "#wrong", "error", "timestamp", *_MEASURE_FIELDS}
#: ``-S 1``'s ``%Y-%m-%d %H:%M:%S`` (``src/util.cu``, ``TIME_STRING_FORMAT``), the host's local time.
_TIMESTAMP = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d")


@dataclass(frozen=True)
class Measure:
    """One half of a row: out-of-place or in-place."""

    time_us: float | None
    algbw_gbs: float | None
    #: Bus bandwidth in GB/s (10^9 bytes/s), as nccl-tests prints it.
    busbw_gbs: float | None
    #: Wrong elements found by the check; ``None`` for ``N/A`` or the old float ``error`` column.
    wrong: int | None
    #: Old versions' max relative error (``0e+00``).
    error: float | None = None
    #: ``-C 1``: the CPU time per iteration, printed instead of ``time_us``.
    cpu_time_us: float | None = None
    #: ``-I 1``: the iterations' shortest, longest and 99th-percentile time and their spread (stdev / mean, %).
    iter_min_us: float | None = None
    iter_max_us: float | None = None
    iter_p99_us: float | None = None
    iter_cv_pct: float | None = None


@dataclass(frozen=True)
class NcclRow:
    size_bytes: int
    count: int
    type: str
    redop: str | None
    root: int | None
    out_of_place: Measure
    in_place: Measure
    #: ``-S 1``: when the row finished, as printed (the host's local time, no zone).
    timestamp: str | None = None


@dataclass(frozen=True)
class NcclTestResult(ParseResult):
    """One run's table and summary; ``warnings`` name the rows that could not be read."""

    #: ``all_reduce_perf``, ``all_reduce_perf_mpi`` etc. when the log names it (command line), else ``None``.
    test: str | None
    rows: tuple[NcclRow, ...]
    #: ``# Avg bus bandwidth`` in GB/s, ``None`` when the run did not get that far.
    avg_busbw_gbs: float | None
    #: The ``FAILED`` (``True``) or ``OK`` after it; ``None``: the run was given no ``NCCL_TESTS_MIN_BW``.
    below_min_bw: bool | None = None
    #: ``NCCL_TESTS_MIN_BW`` as the log's command line (or the caller, who set it) gives it.
    min_bw: str | None = None
    n_threads: int | None = None
    n_gpus: int | None = None
    min_bytes: int | None = None
    max_bytes: int | None = None
    #: ``validation: N`` of the setup line (``-c``): ``0`` means no result was checked; ``None``: not printed.
    validation: int | None = None
    #: ``# Out of bounds values : N OK|FAILED``.
    out_of_bounds: int | None = None
    #: (rank, host, device index, GPU name) from the ``Using devices`` block.
    ranks: tuple[tuple[int, str, int, str], ...] = ()
    #: Lines that say a rank failed (Test NCCL failure, Cuda failure...), stripped.
    errors: tuple[str, ...] = ()
    #: ``NCCL WARN`` lines, stripped: the run's failure only when it did not reach its ``Avg bus bandwidth``.
    nccl_warnings: tuple[str, ...] = ()
    #: What the log's ``NCCL INFO`` lines say about the network (NICs listed and used, their speed, ranks).
    net: NcclNetInfo = field(default_factory=NcclNetInfo)
    #: The run's ``NCCL version 2.18.1+cuda12.1`` line, as printed (``None``: the log has none).
    nccl_version: str | None = None
    #: nccl-tests' own ``# nccl-tests version 2.18.0 ...`` banner (2.14 and later).
    nccl_tests_version: str | None = None
    #: Tables without their own ``Avg bus bandwidth`` (each process of a non-MPI launch prints its own table).
    unfinished_runs: int = 0
    #: The paste leaves lines out (the author's ``...``): ranks and rows may be there that ``ranks`` and ``rows`` lack.
    elided: bool = False

    @property
    def collective(self) -> str | None:
        """``all_reduce`` for ``all_reduce_perf`` and ``all_reduce_perf_mpi``."""
        return self.test.split("_perf", 1)[0] if self.test else None

    @property
    def wrong_total(self) -> int:
        return sum((r.out_of_place.wrong or 0) + (r.in_place.wrong or 0) for r in self.rows)

    @property
    def hosts(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(host for _, host, _, _ in self.ranks))

    @property
    def peak_busbw_gbs(self) -> float | None:
        values = [v for r in self.rows for v in (r.out_of_place.busbw_gbs, r.in_place.busbw_gbs) if v is not None]
        return max(values, default=None)

    @property
    def largest_busbw_gbs(self) -> float | None:
        """Bus bandwidth at the largest size (out-of-place, else in-place): the saturated figure. ``--datatype all``
        and ``--op all`` print a row per type or op at each size: the best of them is what the links carried."""
        largest = max((r.size_bytes for r in self.rows), default=None)
        figures = [r.out_of_place.busbw_gbs if r.out_of_place.busbw_gbs is not None else r.in_place.busbw_gbs
                   for r in self.rows if r.size_bytes == largest]
        return max((figure for figure in figures if figure is not None), default=None)

    def failure(self) -> str | None:
        """Why this run must count as failed, or ``None``."""
        if self.errors:
            return self.errors[0]
        if self.nccl_warnings and self.avg_busbw_gbs is None:
            return self.nccl_warnings[0]  # what NCCL said before the run stopped short
        if not self.rows:
            return "no result table in the output"
        if self.wrong_total > 0:
            return f"{self.wrong_total} wrong element(s) reported (#wrong > 0): data corruption"
        if self.out_of_bounds:
            return f"{self.out_of_bounds} out-of-bounds value(s)"
        if self.avg_busbw_gbs is None:
            return (f"the table stops after the {self.rows[-1].size_bytes}-byte row, before the 'Avg bus bandwidth' "
                    "summary: the run did not finish (killed, timed out, hung) or the log was cut")
        if self.unfinished_runs:
            return (f"{self.unfinished_runs} of the log's tests (one per process: its own setup line and table) "
                    "ended without an 'Avg bus bandwidth' summary of its own: not every process finished")
        if self.below_min_bw:
            threshold = (f"NCCL_TESTS_MIN_BW={self.min_bw} GB/s" if self.min_bw else
                         "the NCCL_TESTS_MIN_BW the run was given (the log does not say which)")
            return (f"nccl-tests marked the run FAILED: its Avg bus bandwidth {self.avg_busbw_gbs:g} GB/s is below "
                    f"90% of {threshold}")
        return None


def _float(token: str, number: int, line: str) -> float | None:
    return None if token.upper() == "N/A" else figure(token, float, _WHAT, number, line)


def _columns(line: str, number: int) -> list[str]:
    names = line.strip().lstrip("#").split()
    unknown = [n for n in names if n not in _KNOWN_COLUMNS]
    if unknown or sum(n in _TIMES for n in names) != 2 or names[:3] != ["size", "count", "type"]:
        raise ParseError(_WHAT, "unrecognised table header", line=number, text=line)
    return names


def _measure(cells: dict[str, str], number: int, line: str) -> Measure:
    figures = {field: _float(cells.get(name, "N/A"), number, line) for name, field in _MEASURE_FIELDS.items()}
    # ``#wrong`` as printed with ``%g``: ``0``, ``1024``, ``1.04858e+06``; ``N/A``: nothing was checked.
    wrong = _float(cells.get("#wrong", "N/A"), number, line)
    if wrong is not None and (wrong < 0 or wrong != wrong):
        raise ParseError(_WHAT, f"{cells['#wrong']!r} is not a count of wrong elements", line=number, text=line)
    return Measure(**figures, wrong=None if wrong is None else round(wrong),
                   error=_float(cells["error"], number, line) if "error" in cells else None)


def _row(tokens: list[str], columns: list[str], number: int, line: str) -> NcclRow:
    if columns[-1] == "timestamp":  # its date and time are one column
        tokens = [*tokens[:-2], " ".join(tokens[-2:])]
    if len(tokens) != len(columns):
        raise ParseError(_WHAT, f"a row has {len(tokens)} columns, the header names {len(columns)}",
                         line=number, text=line)
    first, split = (i for i, name in enumerate(columns) if name in _TIMES)
    lead, oop, inp = (dict(zip(columns[a:b], tokens[a:b], strict=True))
                      for a, b in ((0, first), (first, split), (split, len(columns))))
    root = lead.get("root")
    timestamp = inp.pop("timestamp", None)
    if timestamp is not None and not _TIMESTAMP.fullmatch(timestamp):
        raise ParseError(_WHAT, f"{timestamp!r} is not a timestamp", line=number, text=line)
    return NcclRow(
        size_bytes=figure(lead["size"], int, _WHAT, number, line),
        count=figure(lead["count"], int, _WHAT, number, line),
        type=lead["type"],
        redop=lead.get("redop"),
        root=figure(root, int, _WHAT, number, line) if root is not None else None,
        out_of_place=_measure(oop, number, line),
        in_place=_measure(inp, number, line),
        timestamp=timestamp,
    )


def _lines(pasted: Cleaned) -> Iterator[tuple[int, str]]:
    """The log's lines as the parser reads them, each with its number: launchers' rank tags taken off."""
    for cleaned in without_mpi_tags(pasted.lines):
        # A GitHub paste's Markdown: '\#' escapes the '#' lines, and rows come as a table's '8 | 2 | float | ...'.
        yield cleaned.number, re.sub(r"^(\s*)\\#", r"\1#", cleaned.text)


def looks_like_nccl_tests(text: str) -> bool:
    """Whether ``text`` is an nccl-tests log, not perftest's (``bench report``): it names an nccl-tests binary,
    or holds a line this parser reads as the table's header, the setup or the summary."""
    return bool(_TOOL.search(text)) or any(pattern.match(line) for _, line in _lines(clean(text))
                                           for pattern in (_HEADER, _SETUP, _AVG))


def parse_nccl_tests(text: str, *, test: str | None = None, min_bw: str | None = None) -> NcclTestResult:
    """Parse one nccl-tests run (one or many ranks' output, any version); ``min_bw``: the ``NCCL_TESTS_MIN_BW``
    it ran with, where the caller set it (else the log's command line says).

    A log with no table is not an error here: it is a result with no rows whose
    ``failure()`` says so. Malformed table rows raise ``ParseError`` naming the line.
    """
    columns: list[str] | None = None
    rows: list[NcclRow] = []
    avg: float | None = None
    below_min_bw: bool | None = None
    summaries = setups = tables = 0
    oob: int | None = None
    setup: dict[str, int] = {}
    ranks: dict[tuple[int, str, int, str], str | None] = {}  # (rank, host, device, GPU) -> pid
    errors: list[str] = []
    nccl_warnings: list[str] = []
    seen_rows: set[tuple[str, ...]] = set()
    pasted = clean(text)
    # Ranks and rows behind the author's '...' are unknown: without this, the ranks read look like all there were.
    warnings = pasted.elision_warnings("lines", "the ranks and rows there are unknown")
    elided = bool(warnings)
    info_lines: list[str] = []
    nccl_version: str | None = None
    tests_version: str | None = None
    last_row = 0
    if test is None:
        # From the raw text: the command line the test is named in is often the prompt line the
        # pre-cleaning drops (``user@host:~/nccl-tests$ ./build/alltoall_perf``).
        test = next((found.group(1) for raw in text.splitlines()
                     if not _NCCL_LOG.search(raw) and (found := _TOOL.search(raw))), None)
    min_bw = min_bw or next((found.group(1) for found in _MIN_BW.finditer(text)), None)
    for number, line in _lines(pasted):
        failure = _FAILURE.search(line)
        if failure:
            start = failure.start()
            head = line[:start].split()
            if columns is not None and head and head[0].isdigit() and len(head) > 3:
                # "  1048576  262144  float  sum  -1  host: Test NCCL failure ...": the row never finished.
                warnings.append(ParseWarning(f"the row for {head[0]} bytes was cut by an error printed into it; "
                                             "not read", number))
                errors.append(line[start:].strip())
            else:
                (nccl_warnings if failure.group(0) == "NCCL WARN" else errors).append(line.strip())
            continue
        if nccl_version is None and "NCCL version" in line and (found_version := _NCCL_VERSION.search(line)):
            nccl_version = found_version.group(1)
            if not _NCCL_LOG.search(line):
                continue
        if tests_version is None and (found_tests := _TESTS_VERSION.match(line)):
            tests_version = found_tests.group(1)
            continue
        if _NCCL_LOG.search(line):
            info_lines.append(line)
            continue
        if _HEADER.match(line):
            columns = _columns(line, number)
            tables += 1
            continue
        if found := _AVG.match(line):
            avg = _float(found.group(1), number, line)
            if found.group(2):  # one process's FAILED fails the log
                below_min_bw = bool(below_min_bw) or found.group(2) == "FAILED"
            summaries += 1
            continue
        if found := _OOB.match(line):
            oob = int(found.group(1))
            continue
        if found := _SETUP.match(line):
            setups += 1
            setup = setup or {name: int(value) for name, value in zip(
                ("n_threads", "n_gpus", "min_bytes", "max_bytes", "validation"), found.groups(), strict=True) if value}
            continue
        if found := _RANK.match(line):
            rank, pid, host = int(found.group(1)), found.group(2), found.group(3)
            entry = (rank, host, int(found.group(4)), found.group(6))
            other = next(((known, known_pid) for known, known_pid in ranks.items()
                          if known[0] == rank and (known[1], known_pid) != (host, pid)), None)
            if other and not any(w.message.startswith("rank ") for w in warnings):  # once: the next say the same
                warnings.append(ParseWarning(
                    f"rank {rank} is listed again, by another process ({host}, pid {pid or '?'}; first {other[0][1]}, "
                    f"pid {other[1] or '?'}): each process ran a test of its own (nccl-tests built without MPI=1, "
                    "started by mpirun?), so no figure crossed between them", number))
            ranks.setdefault(entry, pid)
            continue
        stripped = line.strip()
        if stripped.startswith("#") or columns is None:
            continue
        tokens = stripped.replace(" |", " ").split()
        if not tokens[0].isdigit():
            continue  # launcher chatter between rows (mpirun warnings, shell prompts)
        key = tuple(tokens)
        if key in seen_rows:
            continue  # the same row printed by each process of a non-MPI build
        seen_rows.add(key)
        try:
            rows.append(_row(tokens, columns, number, line))
            last_row = number
        except ParseError as exc:
            warnings.append(ParseWarning(f"table row not read: {exc.reason}", number))
    if rows and avg is None and not errors:  # an error line says why it stopped
        warnings.append(ParseWarning(f"the table stops at this row ({rows[-1].size_bytes} bytes): no 'Avg bus "
                                     "bandwidth' summary follows, so the run did not finish or the log was cut",
                                     last_row))
    return NcclTestResult(
        test=test,
        rows=tuple(rows),
        avg_busbw_gbs=avg,
        below_min_bw=below_min_bw,
        min_bw=min_bw,
        **setup,
        out_of_bounds=oob,
        ranks=tuple(sorted(ranks)),
        errors=tuple(errors),
        nccl_warnings=tuple(nccl_warnings),
        warnings=tuple(warnings),
        net=parse_nccl_info(info_lines),
        nccl_version=nccl_version,
        nccl_tests_version=tests_version,
        unfinished_runs=max(setups, tables, 1, summaries) - summaries if rows else 0,
        elided=elided,
    )
