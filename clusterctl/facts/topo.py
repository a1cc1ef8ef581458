"""``nvidia-smi topo -m``: the GPU/NIC connection matrix.

Real outputs differ a lot between drivers and between how they were captured: tabs or
spaces, ANSI underline codes around the header, a shell prompt above the header, the legend
below it, a ``NIC Legend`` on newer drivers (older ones label NIC columns ``mlx5_0``
directly), ``SOC`` (old name of ``SYS``), empty affinity cells, an optional ``GPU NUMA ID``
column, and on some drivers two cells run together (``SYSSYS``) once labels reach ``NIC10``.
The parser keys on what is stable: the header row starts with ``GPU0``, every matrix row
starts with a device label from the header and holds one cell per device.
"""

from __future__ import annotations

import re

from clusterctl.errors import ParseError
from clusterctl.facts.base import Fact
from clusterctl.facts.model import TopoDevice, TopoLink, TopoMatrix

_WHAT = "nvidia-smi topo -m"
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
#: One matrix cell. ``CNS`` etc. are p2p-matrix values some drivers also print here.
_CELL = r"X|NV\d+|PIX|PXB|PHB|NODE|SYS|SOC|CNS|GNS|TNS|NS|DR|U"
_CELL_RE = re.compile(rf"(?:{_CELL})")
_CELLS_RUN_TOGETHER = re.compile(rf"(?:{_CELL}){{2,}}")
_LABEL = re.compile(r"(GPU\d+|NIC\d+|[A-Za-z][A-Za-z0-9]*_[A-Za-z0-9_]+)")
_LABELS_RUN_TOGETHER = re.compile(r"(?:GPU\d+|NIC\d+){2,}")
#: Trailing header columns, in the order drivers print them.
_EXTRA_COLUMNS: tuple[str, ...] = ("CPU Affinity", "NUMA Affinity", "GPU NUMA ID")
_NIC_LEGEND_LINE = re.compile(r"^\s*(NIC\d+)\s*:\s*(\S+)\s*$")


def _split_cells(token: str) -> list[str]:
    """One whitespace token as one or more cells (``SYSSYS`` -> ``SYS``, ``SYS``)."""
    if _CELL_RE.fullmatch(token) or not _CELLS_RUN_TOGETHER.fullmatch(token):
        return [token]
    return _CELL_RE.findall(token)


def _split_labels(token: str) -> list[str]:
    if _LABELS_RUN_TOGETHER.fullmatch(token):
        return re.findall(r"GPU\d+|NIC\d+", token)
    return [token]


def _is_header(tokens: list[str]) -> bool:
    return bool(tokens) and tokens[0] == "GPU0" and (len(tokens) == 1 or tokens[1] != "X")


def _parse_header(line: str, number: int) -> tuple[list[str], list[str]]:
    """Device labels and the trailing column names of the header line."""
    text = line.strip()
    extras: list[str] = []
    cut = len(text)
    for name in _EXTRA_COLUMNS:
        position = text.find(name)
        if position >= 0:
            extras.append(name)
            cut = min(cut, position)
    labels: list[str] = []
    for token in text[:cut].split():
        for label in _split_labels(token):
            if not _LABEL.fullmatch(label):
                raise ParseError(
                    _WHAT, f"unexpected column label {label!r} in header", line=number, text=line
                )
            labels.append(label)
    if len(set(labels)) != len(labels):
        raise ParseError(_WHAT, "duplicate column label in header", line=number, text=line)
    return labels, extras


def _link(a: str, b: str, raw: str, number: int, line: str) -> TopoLink:
    if not _CELL_RE.fullmatch(raw):
        raise ParseError(_WHAT, f"unknown link type {raw!r} for {a} -> {b}", line=number, text=line)
    if (raw == "X") != (a == b):
        raise ParseError(
            _WHAT, f"cell {a} -> {b} is {raw!r}; 'X' belongs on the diagonal only", line=number, text=line
        )
    if raw.startswith("NV"):
        return TopoLink(a=a, b=b, raw=raw, kind="NV", nvlinks=int(raw[2:]))
    return TopoLink(a=a, b=b, raw=raw, kind=raw)


def _affinity_values(rest: list[str], extras: list[str], number: int, line: str) -> dict[str, str | None]:
    """Map what follows the cells to the trailing columns.

    Cells may be empty, so fewer values than columns is normal (NIC rows have none). A CPU
    affinity is never ``N/A``, so a leading ``N/A`` means the CPU Affinity cell was empty.
    """
    if len(rest) > len(extras):
        raise ParseError(
            _WHAT,
            f"{len(rest)} values after the matrix cells, header has {len(extras)} columns",
            line=number,
            text=line,
        )
    columns = list(extras)
    if rest and rest[0] == "N/A" and columns and columns[0] == "CPU Affinity" and len(rest) < len(columns):
        columns = columns[1:]
    values: dict[str, str | None] = {}
    for column, value in zip(columns, rest, strict=False):
        values[column] = None if value in ("", "N/A") else value
    return values


def parse_topo(text: str) -> TopoMatrix:
    """Parse ``nvidia-smi topo -m`` output; see the module docstring for the variants."""
    lines = _ANSI.sub("", text).splitlines()
    header_index = next((i for i, line in enumerate(lines) if _is_header(line.split())), None)
    if header_index is None:
        raise ParseError(_WHAT, "no header line starting with 'GPU0' found")
    labels, extras = _parse_header(lines[header_index], header_index + 1)
    label_set = set(labels)
    cells: dict[str, list[str]] = {}
    row_extras: dict[str, dict[str, str | None]] = {}
    index = header_index + 1
    while index < len(lines):
        line = lines[index]
        number = index + 1
        tokens = line.split()
        if not tokens:
            break
        if tokens[0] not in label_set:
            if tokens[0].rstrip(":") == "Legend" or not any(_CELL_RE.fullmatch(t) for t in tokens[1:2]):
                break
            raise ParseError(
                _WHAT, f"row label {tokens[0]!r} is not a column of the header", line=number, text=line
            )
        label = tokens[0]
        if label in cells:
            raise ParseError(_WHAT, f"second row for {label}", line=number, text=line)
        row: list[str] = []
        for token in tokens[1:]:
            row.extend(_split_cells(token) if len(row) < len(labels) else [token])
        if len(row) < len(labels):
            raise ParseError(
                _WHAT, f"row {label} has {len(row)} cells, expected {len(labels)}", line=number, text=line
            )
        cells[label] = row[: len(labels)]
        row_extras[label] = _affinity_values(row[len(labels) :], extras, number, line)
        for b, raw in zip(labels, cells[label], strict=True):
            _link(label, b, raw, number, line)  # validates each cell where the line is known
        index += 1
    missing = [label for label in labels if label not in cells]
    if missing:
        raise ParseError(
            _WHAT, f"no matrix row for {', '.join(missing)}", line=index + 1 if index < len(lines) else None
        )

    legend, nic_names = _parse_legends(lines[index:])
    devices: list[TopoDevice] = []
    gpu_count = nic_count = 0
    for label in labels:
        values = row_extras[label]
        if label.startswith("GPU"):
            kind, position = "gpu", gpu_count
            gpu_count += 1
            device_name = None
        else:
            kind, position = "nic", nic_count
            nic_count += 1
            device_name = nic_names.get(label, label)
        devices.append(
            TopoDevice(
                label=label,
                kind=kind,
                index=position,
                device_name=device_name,
                cpu_affinity=values.get("CPU Affinity"),
                numa_affinity=values.get("NUMA Affinity"),
                gpu_numa_id=values.get("GPU NUMA ID"),
            )
        )
    links = tuple(_link(a, b, cells[a][j], 0, "") for a in labels for j, b in enumerate(labels))
    return TopoMatrix(devices=tuple(devices), links=links, legend=tuple(legend))


def _parse_legends(lines: list[str]) -> tuple[list[str], dict[str, str]]:
    """Legend lines (kept for display) and the ``NIC Legend`` mapping NIC0 -> mlx5_0."""
    legend: list[str] = []
    nic_names: dict[str, str] = {}
    section = ""
    for line in lines:
        stripped = line.strip()
        if stripped == "Legend:":
            section = "legend"
        elif stripped == "NIC Legend:":
            section = "nic"
        elif not stripped:
            continue
        elif section == "legend" and "=" in stripped:
            legend.append(stripped)
        elif section == "nic":
            match = _NIC_LEGEND_LINE.match(line)
            if match:
                nic_names[match.group(1)] = match.group(2)
    return legend, nic_names


TOPOLOGY: Fact[TopoMatrix] = Fact("topology", "nvidia-smi topo -m", parse_topo)
