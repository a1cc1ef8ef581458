"""``nvidia-smi topo -m``: the GPU/NIC connection matrix.

Real outputs differ a lot between drivers and between how they were captured: tabs or
spaces, ANSI underline codes around the header, a shell prompt above the header, the legend
below it, a ``NIC Legend`` on newer drivers (older ones label NIC columns ``mlx5_0``
directly), ``SOC`` (old name of ``SYS``), empty affinity cells, an optional ``GPU NUMA ID``
column. The parser keys on what is stable: the header row starts with ``GPU0``, every matrix
row starts with a device label and holds one cell per device, and the matrix is symmetric.

What people paste is often damaged, and the parser reads what can still be read, with a
warning naming the line (``TopoMatrix.warnings``):

- nvidia-smi's own column overflow fuses neighbours: ``NIC7NIC8`` and ``SYSSYS`` once labels
  reach ``NIC10``; a long CPU-affinity list glued to the last NIC cell (``SYS0-55,112-167``, or
  with the cell's last letters lost, ``SY0-55,...``) or to the NUMA cell (``0-55,112-1670``).
  They are split where the known link types, the other rows and the symmetric cell make it
  unambiguous; otherwise the cell or affinity is left unknown.
- Markdown pastes put a blank line after every row (the shared pre-cleaning drops them).
- A matrix kept as a comment block (``# `` or ``// `` on every line) is unprefixed by the shared
  pre-cleaning; one kept as a comment block inside a launch script is read from that block.
- A narrow terminal clips the header and the long rows: the missing columns are recovered
  from the row labels and the symmetric cells of the rows that survived, the NIC names from
  the legend; cut affinity values are dropped rather than read wrong.
- A partial paste without the NIC rows or the legend keeps the GPU facts.

Only a missing GPU-to-GPU block (the core of the matrix) refuses the input.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

from clusterctl.errors import ParseError
from clusterctl.facts.base import Fact
from clusterctl.facts.clean import Line, clean_lines, comment_block, seen
from clusterctl.facts.model import ParseWarning, TopoDevice, TopoLink, TopoMatrix

_WHAT = "nvidia-smi topo -m"
#: One matrix cell. ``CNS`` etc. are p2p-matrix values some drivers also print here.
_CELLS: tuple[str, ...] = ("X", "PIX", "PXB", "PHB", "NODE", "SYS", "SOC", "CNS", "GNS", "TNS", "NS", "DR", "U")
_CELL = "|".join((_CELLS[0], r"NV\d+", *_CELLS[1:]))
_CELL_RE = re.compile(rf"(?:{_CELL})")
_CELLS_RUN_TOGETHER = re.compile(rf"(?:{_CELL}){{2,}}")
_LABEL = re.compile(r"(GPU\d+|NIC\d+|[A-Za-z][A-Za-z0-9]*_[A-Za-z0-9_]+)")
_ROW_LABEL = re.compile(r"GPU\d+|NIC\d+|mlx\d_\w+|[a-z]+\d*_\d+")
_RUN_LABEL = re.compile(r"GPU\d+|NIC\d+")
_LABELS_RUN_TOGETHER = re.compile(rf"(?:{_RUN_LABEL.pattern}){{2,}}")
#: A CPU list as nvidia-smi prints it: ``0-55,112-167``, ``0,2,4``.
_CPU_LIST = re.compile(r"\d+(?:-\d+)?(?:,\d+(?:-\d+)?)*")
#: Trailing header columns, in the order drivers print them.
_EXTRA_COLUMNS: tuple[str, ...] = ("CPU Affinity", "NUMA Affinity", "GPU NUMA ID")
_NIC_LEGEND_LINE = re.compile(r"^\s*(NIC\d+)\s*:\s*(\S+)\s*$")


def _cell_candidates(prefix: str) -> set[str]:
    """Link types a cell cut to ``prefix`` can have been (``SY`` -> SYS; ``N`` -> NODE, NV#...)."""
    found = {cell for cell in _CELLS if cell.startswith(prefix) and cell != "X"}
    if "NV".startswith(prefix) or re.fullmatch(r"NV\d*", prefix):
        found.add("NV#")
    if prefix in ("S", "SO", "SY"):
        found = {"SYS"}  # SOC is the old name of SYS: the same link either way
    return found


def _is_cell_prefix(token: str) -> bool:
    return bool(token) and not _CELL_RE.fullmatch(token) and bool(_cell_candidates(token))


def _split(token: str, one: re.Pattern[str], run: re.Pattern[str]) -> list[str]:
    """One whitespace token as one or more cells or labels, fused by nvidia-smi's column overflow
    (``SYSSYS`` -> ``SYS``, ``SYS``; ``NIC7NIC8`` -> ``NIC7``, ``NIC8``)."""
    return one.findall(token) if not one.fullmatch(token) and run.fullmatch(token) else [token]


def _cell_and_affinity(token: str) -> tuple[str, str] | None:
    """``SYS0-55,112-167`` -> (``SYS``, ``0-55,112-167``); ``SY0-55`` -> (``SY``, ``0-55``)."""
    match = re.fullmatch(r"([A-Z]+\d*?)(\d[\d,-]*)", token)
    if not match or not _CPU_LIST.fullmatch(match.group(2)):
        return None
    cell = match.group(1)
    if _CELL_RE.fullmatch(cell) or _is_cell_prefix(cell):
        return cell, match.group(2)
    return None


@dataclass
class _Row:
    label: str
    line: Line
    #: Cells as printed, in column order; a cell cut short keeps its prefix (``SY``).
    cells: list[str] = field(default_factory=list)
    values: list[str] = field(default_factory=list)


@dataclass
class _Header:
    labels: list[str]
    extras: list[str]
    line: Line
    #: The header was cut by a narrow terminal (a partial label or column name at its end).
    clipped: bool = False


#: The header row: it starts with ``GPU0``, and no ``X`` follows (that is the GPU0 row of a paste without a header).
_HEADER = re.compile(r"^\s*GPU0(?!\S)(?!\s+X(?!\S))")


def _parse_header(line: Line, warnings: list[ParseWarning]) -> _Header:
    """Device labels and the trailing column names of the header line."""
    text = " ".join(line.text.split())
    cut = min((position for name in _EXTRA_COLUMNS if (position := text.find(name)) >= 0), default=len(text))
    tokens = text[:cut].split()
    labels: list[str] = []
    clipped = False
    for position, token in enumerate(tokens):
        for label in _split(token, _RUN_LABEL, _LABELS_RUN_TOGETHER):
            if _LABEL.fullmatch(label) and not clipped:
                labels.append(label)
                continue
            rest = " ".join(tokens[position:])
            if any(name.startswith(rest) for name in _EXTRA_COLUMNS) or (
                position >= len(tokens) - 2 and re.fullmatch(r"[A-Za-z]{1,4}\d*", label)
            ):
                clipped = True  # "NI", "CPU Aff": the terminal cut the header here
                continue
            raise ParseError(_WHAT, f"unexpected column label {label!r} in header", line=line.number, text=line.text)
        if clipped:
            break
    extras: list[str] = []
    region = text[cut:].strip()
    for name in _EXTRA_COLUMNS:
        if not region:
            break
        if region.startswith(name):
            extras.append(name)
            region = region[len(name):].strip()
        elif name.startswith(region):
            extras.append(name)
            region, clipped = "", True
    if region:
        clipped = True
    if len(set(labels)) != len(labels):
        raise ParseError(_WHAT, "duplicate column label in header", line=line.number, text=line.text)
    if clipped:
        warnings.append(ParseWarning(
            "the header is cut short (a narrow terminal?): columns past "
            f"{labels[-1] if labels else 'the start'} are read from the rows and the legend", line.number))
    return _Header(labels, extras, line, clipped)


def _tab_values(line: Line, total: int) -> list[str] | None:
    """A tab-separated row's values after its cells, read by position: ``SYS\t\t1\t\tN/A`` is an empty
    CPU Affinity cell (a job's cgroup cpuset holds none of the GPU's CPUs), NUMA ``1`` and ``N/A``.
    nvidia-smi pads after the NUMA cell with a tab of its own, so only the first value is positional.
    ``None`` when the row's cells are not cleanly tab-separated (other readers handle those)."""
    fields = line.text.split("\t")
    if len(fields) <= total + 1 or not all(_CELL_RE.fullmatch(f.strip()) for f in fields[1:total + 1]):
        return None
    rest = [f.strip() for f in fields[total + 1:]]
    if not rest[0] and any(rest[1:]):
        return ["", *(value for value in rest[1:] if value)]
    return None


def _parse_row(line: Line, total: int, columns: int | None = None) -> _Row:
    """``total``: the most cells the row may have; ``columns``: the header's column count when the header
    is whole (a tab-separated row is then read by position)."""
    tokens = line.tokens
    row = _Row(tokens[0], line)
    if columns is not None and "\t" in line.text:
        by_tab = _tab_values(line, columns)
        if by_tab is not None:
            row.cells.extend(cell.strip() for cell in line.text.split("\t")[1:columns + 1])
            row.values.extend(by_tab)
            return row
    for token in tokens[1:]:
        if len(row.cells) >= total or row.values:
            row.values.append(token)
            continue
        split = _split(token, _CELL_RE, _CELLS_RUN_TOGETHER)
        if all(_CELL_RE.fullmatch(cell) for cell in split):
            row.cells.extend(split[: total - len(row.cells)])
            continue
        fused = _cell_and_affinity(token)
        if fused is not None:
            row.cells.append(fused[0])
            row.values.append(fused[1])
            continue
        if _is_cell_prefix(token):
            row.cells.append(token)
            continue
        row.values.append(token)
    return row


def _is_row(tokens: list[str], header_labels: set[str]) -> bool:
    if len(tokens) < 2:
        return False
    if tokens[0] not in header_labels and not _ROW_LABEL.fullmatch(tokens[0]):
        return False
    first = tokens[1]
    return bool(_CELL_RE.fullmatch(first) or _CELLS_RUN_TOGETHER.fullmatch(first) or _is_cell_prefix(first))


def _link(a: str, b: str, raw: str) -> TopoLink:
    if raw.startswith("NV"):
        return TopoLink(a=a, b=b, raw=raw, kind="NV", nvlinks=int(raw[2:]))
    return TopoLink(a=a, b=b, raw=raw, kind=raw)


def _legends(lines: list[Line]) -> tuple[dict[str, str], bool]:
    """The ``NIC Legend`` (NIC0 -> mlx5_0), and whether a legend was seen."""
    nic_names: dict[str, str] = {}
    seen = in_nic_legend = False
    for line in lines:
        stripped = line.text.strip()
        if stripped in ("Legend:", "NIC Legend:"):
            seen, in_nic_legend = True, stripped == "NIC Legend:"
        elif in_nic_legend and (match := _NIC_LEGEND_LINE.match(line.text)):
            nic_names[match.group(1)] = match.group(2)
    return nic_names, seen


def _names(labels: list[str]) -> str:
    return labels[0] if len(labels) == 1 else f"{labels[0]}..{labels[-1]}"


def _rows_named(rows: list[_Row]) -> str:
    """``row GPU0 (line 2)`` or ``rows GPU0..NIC7 (lines 2-17)``."""
    if len(rows) == 1:
        return f"row {rows[0].label} (line {rows[0].line.number})"
    first, last = rows[0].line.number, rows[-1].line.number
    return f"rows {_names([r.label for r in rows])} ({len(rows)} rows, lines {first}-{last})"


class _Reader:
    """One parse: the rows as found, then the links, then the devices."""

    def __init__(self, lines: list[Line]) -> None:
        self.lines = lines
        self.warnings: list[ParseWarning] = []

    def warn(self, message: str, line: int | None = None) -> None:
        self.warnings.append(ParseWarning(message, line))

    def read(self) -> TopoMatrix:
        header_index = next((i for i, line in enumerate(self.lines) if _HEADER.match(line.text)), None)
        if header_index is None:
            raise ParseError(_WHAT, "no header line starting with 'GPU0' found")
        header = _parse_header(self.lines[header_index], self.warnings)
        rows, end = self._rows(header, header_index + 1)
        nic_names, legend_seen = _legends(self.lines[end:])
        labels = self._labels(header, rows, nic_names)
        lost = [label for label in rows if label not in header.labels]
        if lost and not header.clipped:
            header.clipped = True
            self.warn(f"rows {_names(lost)} have no column in the header: the header was cut short (a narrow "
                      "terminal?); their columns are read from the rows", header.line.number)
        cells = self._cells(header, rows, labels)
        self._check_core(labels, cells, rows, header)
        self._note_missing(header, labels, rows, nic_names, legend_seen, cells)
        devices = self._devices(header, rows, labels, nic_names)
        links = tuple(_link(a, b, cells[(a, b)]) for a in labels for b in labels if (a, b) in cells)
        ordered = sorted(self.warnings, key=lambda w: (w.line is None, w.line or 0))
        return TopoMatrix(devices=tuple(devices), links=links, warnings=tuple(ordered))

    def _rows(self, header: _Header, start: int) -> tuple[dict[str, _Row], int]:
        known = set(header.labels)
        rows: dict[str, _Row] = {}
        index = start
        while index < len(self.lines):
            line = self.lines[index]
            tokens = line.tokens
            if tokens[0].rstrip(":") in ("Legend", "NIC Legend") or not _is_row(tokens, known):
                if tokens[0] in known and len(tokens) == 1:
                    index += 1  # a row cut right after its label: nothing to read in it
                    self.warn(f"row {tokens[0]} has no cells", line.number)
                    continue
                break
            if tokens[0] in rows:
                raise ParseError(_WHAT, f"second row for {tokens[0]}", line=line.number, text=line.text)
            rows[tokens[0]] = _parse_row(line, len(header.labels) + 64,
                                         None if header.clipped else len(header.labels))
            index += 1
        return rows, index

    def _labels(self, header: _Header, rows: dict[str, _Row], nic_names: dict[str, str]) -> list[str]:
        """Every device, in column order: the header's, then rows the clipped header lost, then legend NICs."""
        labels = [*header.labels, *(label for label in rows if label not in header.labels)]
        for label in nic_names:
            if label not in labels and (any(x.startswith("NIC") for x in labels) or header.clipped):
                labels.append(label)
        return labels

    def _cells(self, header: _Header, rows: dict[str, _Row], labels: list[str]) -> dict[tuple[str, str], str]:
        total = len(labels)
        cells: dict[tuple[str, str], str] = {}
        partial: dict[tuple[str, str], tuple[str, Line]] = {}
        short: list[_Row] = []
        for label, row in rows.items():
            own = labels.index(label)
            if len(row.cells) > total:
                row.values = row.cells[total:] + row.values
                row.cells = row.cells[:total]
            diagonal = row.cells[own] if own < len(row.cells) else None
            if diagonal is not None and diagonal != "X":
                self.warn(f"row {label} has {diagonal!r} where its own column should be 'X': its cells are "
                          "misaligned and were not read", row.line.number)
                row.cells = []
            elif "X" in row.cells[:own] or "X" in row.cells[own + 1:]:
                self.warn(f"row {label} has 'X' off the diagonal: its cells were not read", row.line.number)
                row.cells = []
            for position, raw in enumerate(row.cells):
                b = labels[position]
                if _CELL_RE.fullmatch(raw):
                    cells[(label, b)] = raw
                else:
                    partial[(label, b)] = (raw, row.line)
            if len(row.cells) < total and row.cells:
                short.append(row)
        if short:
            counts = sorted({len(r.cells) for r in short})
            have = " or ".join(str(c) for c in counts)
            self.warn(f"{_rows_named(short)} have {have} of {total} cells (cut short or not pasted); the missing "
                      "cells are taken from the rows that have them", short[0].line.number)
        self._resolve_partial(partial, cells)
        self._fill_symmetric(labels, cells, rows)
        for label in labels:
            cells[(label, label)] = "X"
        return cells

    def _resolve_partial(self, partial: dict[tuple[str, str], tuple[str, Line]],
                         cells: dict[tuple[str, str], str]) -> None:
        for (a, b), (prefix, line) in partial.items():
            mirror = cells.get((b, a))
            candidates = _cell_candidates(prefix)
            if mirror is not None and (mirror in candidates or (mirror.startswith("NV") and "NV#" in candidates)):
                cells[(a, b)] = mirror
                self.warn(f"cell {a} -> {b} printed as {prefix!r} (letters lost to the next column); read as "
                          f"{mirror}, as the {b} row has it", line.number)
            elif len(candidates) == 1 and "NV#" not in candidates:
                value = next(iter(candidates))
                cells[(a, b)] = value
                self.warn(f"cell {a} -> {b} printed as {prefix!r} (letters lost to the next column); only "
                          f"{value} starts so", line.number)
            else:
                self.warn(f"cell {a} -> {b} printed as {prefix!r} (letters lost to the next column) could be "
                          f"{' or '.join(sorted(candidates))}: left unknown", line.number)

    def _fill_symmetric(self, labels: list[str], cells: dict[tuple[str, str], str], rows: dict[str, _Row]) -> None:
        for a in labels:
            for b in labels:
                if a == b:
                    continue
                here, there = cells.get((a, b)), cells.get((b, a))
                if here is None and there is not None:
                    cells[(a, b)] = there
                elif here is not None and there is not None and here != there:
                    line = rows[a].line.number if a in rows else None
                    if labels.index(a) < labels.index(b):
                        self.warn(f"{a} -> {b} is {here} but {b} -> {a} is {there}: left unknown", line)
                    cells.pop((a, b), None)
                    cells.pop((b, a), None)

    def _check_core(self, labels: list[str], cells: dict[tuple[str, str], str], rows: dict[str, _Row],
                    header: _Header) -> None:
        gpus = [label for label in labels if label.startswith("GPU")]
        if not any(label in rows for label in gpus):
            raise ParseError(_WHAT, "no GPU rows under the header: the GPU-to-GPU block is missing",
                             line=header.line.number, text=header.line.text)
        for a in gpus:
            for b in gpus:
                if (a, b) not in cells:
                    line = rows[a].line if a in rows else (rows[b].line if b in rows else header.line)
                    raise ParseError(_WHAT, f"the link {a} -> {b} is in neither the {a} nor the {b} row: the "
                                     "GPU-to-GPU block is incomplete", line=line.number, text=line.text)

    def _note_missing(self, header: _Header, labels: list[str], rows: dict[str, _Row], nic_names: dict[str, str],
                      legend_seen: bool, cells: dict[tuple[str, str], str]) -> None:
        gpus = [label for label in labels if label.startswith("GPU")]
        unknown = [(g, n) for g in gpus for n in labels if not n.startswith("GPU") and (g, n) not in cells]
        if unknown:
            nics = list(dict.fromkeys(n for _, n in unknown))
            self.warn(f"{len(unknown)} GPU-NIC links are in no row ({_names(nics)} from some GPUs): which NIC is "
                      "nearest to those GPUs may be wrong")
        missing = [label for label in labels if label not in rows and label in header.labels]
        lost_gpus = [label for label in missing if label.startswith("GPU")]
        if lost_gpus:
            self.warn(f"no row for {_names(lost_gpus)} (not pasted?): its links are taken from the other rows, its "
                      "affinity is unknown")
        nics = [label for label in missing if not label.startswith("GPU")]
        if nics:
            self.warn(f"no rows for {_names(nics)} (not pasted?): links between NICs are unknown")
        legend_only = [label for label in labels if label not in rows and label not in header.labels]
        if legend_only:
            self.warn(f"{_names(legend_only)} known only from the NIC Legend: their links are unknown")
        unnamed = [label for label in labels if re.fullmatch(r"NIC\d+", label) and label not in nic_names]
        if unnamed:
            why = "not pasted" if not legend_seen else "has no line for them"
            self.warn(f"the NIC Legend {why}: {_names(unnamed)} are shown by label, not HCA name")

    def _devices(self, header: _Header, rows: dict[str, _Row], labels: list[str],
                 nic_names: dict[str, str]) -> list[TopoDevice]:
        affinity = self._affinities(header, rows)
        devices: list[TopoDevice] = []
        counts: Counter[str] = Counter()  # a device's index is its place among those of its kind
        for label in labels:
            values = affinity.get(label, {})
            kind = "gpu" if label.startswith("GPU") else "nic"
            devices.append(TopoDevice(label=label, kind=kind, index=counts[kind],
                                      device_name=None if kind == "gpu" else nic_names.get(label, label),
                                      cpu_affinity=values.get("CPU Affinity"),
                                      numa_affinity=values.get("NUMA Affinity"),
                                      gpu_numa_id=values.get("GPU NUMA ID")))
            counts[kind] += 1
        return devices

    def _affinities(self, header: _Header, rows: dict[str, _Row]) -> dict[str, dict[str, str | None]]:
        extras = list(header.extras) or (list(_EXTRA_COLUMNS) if header.clipped else [])
        width = len(header.line.text.expandtabs()) if header.clipped else None
        # CPU lists of rows whose every trailing column is there: the reference to split glued cells by.
        clean_affinities = {r.values[0] for r in rows.values()
                            if r.values and _CPU_LIST.fullmatch(r.values[0]) and len(r.values) >= max(2, len(extras))}
        found: dict[str, dict[str, str | None]] = {}
        cut: list[_Row] = []
        for label, row in rows.items():
            values = list(row.values)
            if width is not None and values and len(row.line.text.expandtabs()) >= width - 1:
                cut.append(row)
                values.pop()
            if self._cpu_cell_empty(header, row, values, extras):
                values = ["", *values]
            found[label] = self._map_values(label, row, values, extras, clean_affinities)
        if cut:
            shown = ", ".join(dict.fromkeys(repr(r.values[-1]) for r in cut))
            self.warn(f"{_rows_named(cut)} reach the width the header was cut at: their last value ({shown}) may be "
                      "cut and was not read", cut[0].line.number)
        if header.clipped and "NUMA Affinity" not in header.extras:
            gpus = [label for label in rows if label.startswith("GPU")]
            if gpus and not any(found.get(label, {}).get("NUMA Affinity") for label in gpus):
                self.warn("the NUMA Affinity column was cut off: the GPUs' NUMA nodes are unknown", header.line.number)
        return found

    def _map_values(self, label: str, row: _Row, values: list[str], extras: list[str],
                    clean_affinities: set[str]) -> dict[str, str | None]:
        number = row.line.number
        if values and not extras:
            self.warn(f"row {label}: {' '.join(values)!r} is not a link type and the header has no affinity "
                      "columns: not read", number)
            return {}
        if len(values) > len(extras):
            self.warn(f"row {label} has {len(values)} values after its cells, the header names {len(extras)} "
                      "columns: its affinity was not read", number)
            return {}
        columns = list(extras)
        if values and values[0] == "N/A" and columns and columns[0] == "CPU Affinity" and len(values) < len(columns):
            columns = columns[1:]  # an empty CPU Affinity cell: a CPU affinity is never N/A
        mapped: dict[str, str | None] = {
            column: None if value in ("", "N/A") else value for column, value in zip(columns, values, strict=False)}
        glued = self._glued_numa(mapped.get("CPU Affinity"), clean_affinities)
        if glued is not None and "NUMA Affinity" in columns and len(values) < len(columns):
            cpu, numa = glued
            self.warn(f"row {label}: CPU affinity and NUMA cell printed together as {cpu + numa!r}; read as "
                      f"{cpu} and NUMA {numa}, as other rows print that CPU list", number)
            mapped = {"CPU Affinity": cpu, "NUMA Affinity": numa,
                      **{column: None if value == "N/A" else value
                         for column, value in zip(columns[2:], values[1:], strict=False)}}
        elif "CPU Affinity" in mapped and mapped["CPU Affinity"] is not None and not _CPU_LIST.fullmatch(
                mapped["CPU Affinity"] or ""):
            self.warn(f"row {label}: {mapped['CPU Affinity']!r} is not a CPU list: its affinity was not read", number)
            return {}
        elif self._suspect_glued(mapped.get("CPU Affinity"), clean_affinities) and len(values) < len(columns):
            self.warn(f"row {label}: CPU affinity {mapped['CPU Affinity']!r} looks fused with the NUMA cell and no "
                      "other row tells where to split it: CPU and NUMA affinity left unknown", number)
            return {}
        return mapped

    @staticmethod
    def _cpu_cell_empty(header: _Header, row: _Row, values: list[str], extras: list[str]) -> bool:
        """A space-aligned row whose first value stands under the NUMA Affinity heading: its CPU Affinity
        cell is empty (a job's cgroup cpuset holds none of the GPU's CPUs), read by position."""
        if header.clipped or "\t" in row.line.text or not values or values[0] == "":
            return False
        if len(values) >= len(extras) or extras[:2] != ["CPU Affinity", "NUMA Affinity"]:
            return False
        heading = header.line.text.expandtabs()
        cpu_at, numa_at = heading.find("CPU Affinity"), heading.find("NUMA Affinity")
        if cpu_at < 0 or numa_at <= cpu_at:
            return False
        words = [m.start() for m in re.finditer(r"\S+", row.line.text.expandtabs())]
        first_value_at = words[-len(values)] if len(words) >= len(values) else -1
        # Under NUMA Affinity's heading (a NUMA node is one or two digits; a CPU list starts under its own).
        return first_value_at >= numa_at - 1

    @staticmethod
    def _glued_numa(cpu: str | None, clean: set[str]) -> tuple[str, str] | None:
        if cpu is None or cpu in clean:
            return None
        for known in sorted(clean, key=len, reverse=True):
            rest = cpu[len(known):]
            if cpu.startswith(known) and rest.isdigit():
                return known, rest
        return None

    @staticmethod
    def _suspect_glued(cpu: str | None, clean: set[str]) -> bool:
        """A CPU list whose highest CPU is beyond every other row's: a NUMA digit glued on."""
        if cpu is None or cpu in clean or not clean or not _CPU_LIST.fullmatch(cpu):
            return False
        highest = max(int(n) for known in clean for n in re.findall(r"\d+", known))
        return max(int(n) for n in re.findall(r"\d+", cpu)) > highest


def parse_topo(text: str) -> TopoMatrix:
    """Parse ``nvidia-smi topo -m`` output; see the module docstring for the variants.

    A matrix kept as a ``#``/``//`` comment block inside a longer file (a launch script, a source
    file) is read from that block; when there is no header at all, the error says what the input
    looked like instead."""
    lines = clean_lines(text)
    if not any(_HEADER.match(line.text) for line in lines):
        block = comment_block(text, _HEADER)
        if block is None:
            raise ParseError(_WHAT, f"no header line starting with 'GPU0' found; {seen(text)}")
        lines = block
    return _Reader(lines).read()


TOPOLOGY: Fact[TopoMatrix] = Fact("topology", "nvidia-smi topo -m", parse_topo)
