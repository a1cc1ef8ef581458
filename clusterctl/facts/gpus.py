"""``nvidia-smi --query-gpu=... --format=csv``: one row per GPU.

The parser reads the CSV header, so outputs of any subset of the fields (recorded with
other field lists) parse too; fields it does not know are ignored.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from clusterctl.errors import ParseError
from clusterctl.facts.base import Fact
from clusterctl.facts.clean import clean_lines
from clusterctl.facts.model import GPUInfo
from clusterctl.facts.nvsmi_query import LOST_GPU, NOT_AVAILABLE

_WHAT = "nvidia-smi --query-gpu"

_NUMBER = re.compile(r"^(-?\d+(?:\.\d+)?)(?:\s*([A-Za-z]+))?$")


def _number(value: str, unit: str | None) -> float:
    match = _NUMBER.match(value)
    if not match or (unit is not None and match.group(2) not in (None, unit)):
        raise ValueError(f"expected a number{f' in {unit}' if unit else ''}, got {value!r}")
    return float(match.group(1))


def _int(unit: str | None = None) -> Callable[[str], int]:
    def convert(value: str) -> int:
        number = _number(value, unit)
        if number != int(number):
            raise ValueError(f"expected a whole number, got {value!r}")
        return int(number)

    return convert


def _enabled(value: str) -> bool:
    if value in ("Enabled", "On"):
        return True
    if value in ("Disabled", "Off"):
        return False
    raise ValueError(f"expected Enabled/Disabled, got {value!r}")


#: CSV field -> (GPUInfo attribute, converter).
_FIELDS: dict[str, tuple[str, Callable[[str], Any]]] = {
    "index": ("index", _int()),
    "name": ("name", str),
    "uuid": ("uuid", str),
    "pci.bus_id": ("pci_bus_id", str),
    "memory.total": ("memory_total_mib", _int("MiB")),
    "driver_version": ("driver_version", str),
    "persistence_mode": ("persistence_mode", _enabled),
    "ecc.mode.current": ("ecc_mode", _enabled),
    "ecc.errors.uncorrected.volatile.total": ("ecc_errors_uncorrected", _int()),
    "power.limit": ("power_limit_w", lambda value: _number(value, "W")),
    "pcie.link.gen.current": ("pcie_gen_current", _int()),
    "pcie.link.gen.max": ("pcie_gen_max", _int()),
    "pcie.link.width.current": ("pcie_width_current", _int()),
    "pcie.link.width.max": ("pcie_width_max", _int()),
}
#: The fields the survey asks for: every one the parser reads, in this order.
QUERY_FIELDS: tuple[str, ...] = tuple(_FIELDS)


def _field_name(header_cell: str) -> str:
    """``memory.total [MiB]`` -> ``memory.total``."""
    return re.sub(r"\s*\[[^\]]*\]\s*$", "", header_cell.strip())


def parse_gpus(text: str) -> tuple[GPUInfo, ...]:
    lines = clean_lines(text)  # a pasted output's prompt line above the header is no header
    if not lines:
        raise ParseError(_WHAT, "empty output: no CSV header")
    header_number, header_line = lines[0]
    columns = [_field_name(cell) for cell in header_line.split(",")]
    if not any(column in _FIELDS for column in columns):
        raise ParseError(_WHAT, "first line is not a CSV header naming query fields", line=header_number,
                         text=header_line)
    if len(set(columns)) != len(columns):
        raise ParseError(_WHAT, "a field is named twice in the CSV header", line=header_number, text=header_line)
    gpus: list[GPUInfo] = []
    for position, (number, line) in enumerate(lines[1:]):
        if LOST_GPU.match(line):
            continue  # a GPU nvidia-smi cannot open: the others are read, and the host counts one GPU fewer
        values = [value.strip() for value in line.split(",")]
        if len(values) != len(columns):
            raise ParseError(_WHAT, f"{len(values)} values, header has {len(columns)} fields", line=number, text=line)
        attributes: dict[str, Any] = {"index": position}
        for column, value in zip(columns, values, strict=True):
            if column not in _FIELDS:
                continue
            attribute, convert = _FIELDS[column]
            if value.lower() in NOT_AVAILABLE:
                if attribute == "index":
                    raise ParseError(_WHAT, "GPU index is not available", line=number, text=line)
                attributes[attribute] = None
                continue
            try:
                attributes[attribute] = convert(value)
            except ValueError as error:
                raise ParseError(_WHAT, f"field {column}: {error}", line=number, text=line) from None
        gpus.append(GPUInfo(**attributes))
    indexes = [gpu.index for gpu in gpus]
    if len(set(indexes)) != len(indexes):
        raise ParseError(_WHAT, "the same GPU index appears twice")
    return tuple(gpus)


GPUS: Fact[tuple[GPUInfo, ...]] = Fact(
    "gpus",
    f"nvidia-smi --query-gpu={','.join(QUERY_FIELDS)} --format=csv",
    parse_gpus,
)


def parse_persistence_modes(text: str) -> dict[int, bool | None]:
    """``nvidia-smi --query-gpu=index,persistence_mode --format=csv``: GPU index -> persistence mode on
    (``None``: the GPU cannot report it). Read before a GPU reset, which persistence mode refuses."""
    header = next((line.text for line in clean_lines(text)), "")
    if "persistence_mode" not in (_field_name(cell) for cell in header.split(",")):
        raise ParseError(_WHAT, "the CSV header names no persistence_mode field", line=1, text=header)
    return {gpu.index: gpu.persistence_mode for gpu in parse_gpus(text)}


#: One GPU's: the command with ``-i N``.
PERSISTENCE_MODES: Fact[dict[int, bool | None]] = Fact(
    "persistence_modes",
    "nvidia-smi --query-gpu=index,persistence_mode --format=csv",
    parse_persistence_modes,
)
