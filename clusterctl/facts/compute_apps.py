"""``nvidia-smi --query-compute-apps=gpu_uuid,pid,process_name,used_memory --format=csv``: who computes on which GPU.

The CSV's header names the columns (any subset, any order, as asked); a GPU with no process has
no row, an idle host prints the header alone. ``process_name`` is ``[Not Found]`` for a process
nvidia-smi cannot see from its PID namespace (a container's, read from another); values may be
``[N/A]``. Header names are nvidia-smi's (``used_gpu_memory [MiB]`` for ``used_memory``).
"""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass

from clusterctl.errors import ParseError
from clusterctl.facts.clean import clean_lines
from clusterctl.facts.nvsmi_query import NOT_AVAILABLE

COMMAND = "nvidia-smi --query-compute-apps=gpu_uuid,pid,process_name,used_memory --format=csv"
_MIB = re.compile(r"^(\d+)(?:\s*MiB)?$")
_COLUMNS = {"gpu_uuid": "gpu_uuid", "pid": "pid", "process_name": "process_name", "name": "process_name",
            "used_gpu_memory [MiB]": "used_mib", "used_memory [MiB]": "used_mib",
            # fields one may ask for that clusterctl does not read: passed over, not a reason to refuse the header
            "timestamp": "", "gpu_name": "", "gpu_bus_id": "", "gpu_serial": ""}


@dataclass(frozen=True)
class ComputeApp:
    gpu_uuid: str | None
    pid: int | None
    process_name: str | None
    used_mib: int | None

    def describe(self) -> str:
        name = self.process_name or "?"
        memory = f", {self.used_mib} MiB" if self.used_mib is not None else ""
        return f"pid {self.pid if self.pid is not None else '?'} {name}{memory}"


def parse_compute_apps(text: str) -> tuple[ComputeApp, ...]:
    """The processes listed, in order; ``()`` for the header alone."""
    what = "nvidia-smi --query-compute-apps"
    lines = clean_lines(text)
    if not lines:
        raise ParseError(what, "no output (not even the CSV header)")
    header_no, header = lines[0]
    names = [h.strip() for h in header.split(",")]
    unknown = [n for n in names if n not in _COLUMNS]
    if unknown:
        raise ParseError(what, f"not the CSV header of --query-compute-apps (column {unknown[0]!r})", line=header_no,
                         text=header)
    keys = [_COLUMNS[n] for n in names]
    apps = []
    for number, line in lines[1:]:
        # A process name may hold commas (a browser's whole command line): it takes what is left over.
        cells = next(csv.reader([line], skipinitialspace=True))
        if len(cells) > len(keys) and "process_name" in keys:
            at = keys.index("process_name")
            extra = len(cells) - len(keys)
            cells = [*cells[:at], ",".join(cells[at:at + extra + 1]), *cells[at + extra + 1:]]
        if len(cells) != len(keys):
            raise ParseError(what, f"{len(cells)} values for {len(keys)} columns", line=number, text=line)
        row = dict(zip(keys, (None if c.strip().lower() in NOT_AVAILABLE else c.strip() for c in cells), strict=True))
        pid = row.get("pid")
        memory = row.get("used_mib")
        if pid is not None and not pid.isdigit():
            raise ParseError(what, f"pid {pid!r} is not a number", line=number, text=line)
        used = _MIB.match(memory) if memory is not None else None
        if memory is not None and used is None:
            raise ParseError(what, f"memory {memory!r} is not 'N MiB'", line=number, text=line)
        apps.append(ComputeApp(row.get("gpu_uuid"), int(pid) if pid is not None else None, row.get("process_name"),
                               int(used.group(1)) if used else None))
    return tuple(apps)
