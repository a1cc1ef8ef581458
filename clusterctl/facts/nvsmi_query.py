"""``nvidia-smi -q``: the per-GPU health sections (ECC, retired pages, row remapper, clock
event reasons, temperatures, power, PCIe link, persistence, MIG, reset status, fabric).

The output is a tree by indentation: ``GPU 00000000:07:00.0`` opens a GPU; under it
``Key : Value`` lines and section lines (``ECC Errors``) whose children are indented further.
Section and key names changed over driver releases (``Clocks Throttle Reasons`` became
``Clocks Event Reasons`` in 535, ``Power Readings`` became ``GPU Power Readings``, ``Single Bit`` /
``Double Bit`` ECC became ``SRAM``/``DRAM Correctable``/``Uncorrectable`` on Ampere); the reader
looks each value up under every name it had. A pasted output is pre-cleaned (prompt, borders)
and may be clipped (``[...]``): what is missing is ``None`` and the clipped lines are warnings.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable

from clusterctl.errors import ParseError
from clusterctl.facts.clean import clean
from clusterctl.facts.health_model import EccCounts, GpuHealth, NvidiaSmiQuery
from clusterctl.facts.model import ParseWarning

_WHAT = "nvidia-smi -q"
_GPU = re.compile(r"^GPU ([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f])\s*$")
_SECTION = re.compile(r"^(\s*)([A-Za-z][\w ./()+-]*?)\s*$")
_NUMBER = re.compile(r"^(-?\d+(?:\.\d+)?)")
_VERSION = re.compile(r"^\d+(?:\.\d+)+")

#: What a person appends to a value to point at it (``Pending : Yes  <-- here``, ``# the culprit``).
_ANNOTATION = re.compile(r"\s+((?:<-+|<=+|<<+|-+>|=+>|←|⬅|👈|#|//|\*{2,}|!{2,}).*)$")
#: What every annotation holds: a text with none of these has none (the search is skipped).
_ANNOTATION_MARKS = ("<", ">", "←", "⬅", "👈", "#", "//", "**", "!!")
#: The words a yes/no value is read from, longest first (``Not Active`` before ``Active``).
_YES_NO = re.compile(r"^(not active|yes|no|enabled|disabled|on|off|active|true|false|none)\b\s*(.*)$", re.IGNORECASE)
#: Values that say the tool printed nothing to read (an error string such as ``Unknown Error`` is a value).
#: 575+ drivers print "Requested functionality has been deprecated" for GPU Reset Status (see GPU Recovery Action).
_NOT_PRINTED = {"n/a", "[n/a]", "not supported", "[not supported]", "not available", "",
                "requested functionality has been deprecated"}
#: ... and those that say it has no value to give (lower case): every nvidia-smi reader's one list (``-q``, the CSVs).
NOT_AVAILABLE = _NOT_PRINTED | {"unknown error", "[unknown error]", "insufficient permissions",
                                 "[insufficient permissions]"}
#: The line nvidia-smi prints instead of a GPU it cannot open (fallen off the bus, lost), and goes on with the others:
#: ``Unable to determine the device handle for GPU1: 0000:34:00.0: Unknown Error`` (610+ name the index too).
LOST_GPU = re.compile(r"^Unable to determine the device handle for GPU ?(?:\d+: )?(\S+): (.+)$", re.I | re.M)


class GpuValues(dict[str, str]):
    """A GPU block's ``path -> value``, and for each path the line it was on; what was read from a
    value only in part (a note after it, a value that is not one) is collected while reading."""

    def __init__(self) -> None:
        super().__init__()
        self.lines: dict[str, int] = {}
        self.notes: list[str] = []
        self.unread: list[str] = []

    def note(self, path: str, text: str) -> None:
        entry = f"line {self.lines.get(path, '?')}: {path}: {text}"
        if entry not in self.notes:
            self.notes.append(entry)


def _value(values: GpuValues, *paths: str) -> str | None:
    for path in paths:
        raw = values.get(path)
        if raw is not None and raw.strip().lower() not in NOT_AVAILABLE:
            return raw.strip()
    return None


#: What nvidia-smi prints after a number: anything else after it is a person's note, kept as one.
_UNITS = frozenset({"W", "C", "F", "%", "MHz", "MiB", "GiB", "KiB", "MB", "GB", "KB", "KB/s", "MB/s", "GB/s", "mV", "V",
                    "us", "ms", "s", "J", "mJ", "RPM", "bank(s)", "x", "pages"})


def _first_match(values: GpuValues, paths: tuple[str, ...], printed: Callable[[GpuValues, str], str | None],
                 pattern: re.Pattern[str]) -> tuple[str, str, re.Match[str]] | None:
    """The first of ``paths`` with a ``printed`` value, that value and ``pattern``'s match of it. A value
    the pattern does not match is recorded as unread (``None``): unknown, never taken for a good one."""
    for path in paths:
        raw = printed(values, path)
        if raw is None:
            continue
        match = pattern.match(raw)
        if match is None:
            if path not in values.unread:
                values.unread.append(path)
            return None
        return path, raw, match
    return None


def _number(values: GpuValues, *paths: str) -> float | None:
    """The leading number of the first printed value; text after it other than its unit is a note."""
    found = _first_match(values, paths, _value, _NUMBER)
    if found is None:
        return None
    path, raw, match = found
    rest = raw[match.end():].strip()
    if rest and rest not in _UNITS:
        values.note(path, rest)
    return float(match.group(1))


def _int(values: GpuValues, *paths: str) -> int | None:
    found = _number(values, *paths)
    return int(found) if found is not None else None


def _printed(values: GpuValues, path: str) -> str | None:
    """The value as printed, error strings included (``Unknown Error``); ``None`` for N/A or absent."""
    raw = values.get(path)
    if raw is None or raw.strip().lower() in _NOT_PRINTED:
        return None
    return raw.strip().strip("[]")


def _yes(values: GpuValues, *paths: str) -> bool | None:
    """Yes/No read from the first printed value's leading word (error strings are no such word: unread);
    what follows it is kept as a note."""
    found = _first_match(values, paths, _printed, _YES_NO)
    if found is None:
        return None
    path, _, match = found
    if match.group(2):
        values.note(path, match.group(2))
    return match.group(1).lower() in ("yes", "enabled", "on", "active", "true")


def _ecc(values: GpuValues) -> EccCounts:
    def count(scope: str, kind: str) -> int | None:
        new = [_int(values, f"ECC Errors/{scope}/{mem} {kind}") for mem in ("SRAM", "DRAM")]
        if kind == "Uncorrectable" and new[0] is None:
            # 550+ split SRAM uncorrectable errors by how they were caught.
            new += [_int(values, f"ECC Errors/{scope}/SRAM Uncorrectable {how}") for how in ("Parity", "SEC-DED")]
        if known := [v for v in new if v is not None]:
            return sum(known)
        old = "Single Bit" if kind == "Correctable" else "Double Bit"
        return _int(values, f"ECC Errors/{scope}/{old}/Total")

    return EccCounts(count("Volatile", "Correctable"), count("Volatile", "Uncorrectable"),
                     count("Aggregate", "Correctable"), count("Aggregate", "Uncorrectable"))


def _clock_events(values: GpuValues) -> tuple[str, ...]:
    # Not "Clocks Event Reasons Counters": durations, not states.
    return tuple(path.rsplit("/", 1)[-1] for path, raw in values.items() if raw.strip().lower() == "active"
                 and "/" in path and path.split("/", 1)[0] in ("Clocks Event Reasons", "Clocks Throttle Reasons"))


def _gpu(index: int, bus_id: str, line: int, values: GpuValues) -> GpuHealth:
    return GpuHealth(
        index=index, bus_id=bus_id.lower(), line=line,
        name=_value(values, "Product Name"), uuid=_value(values, "GPU UUID"), serial=_value(values, "Serial Number"),
        persistence_mode=_yes(values, "Persistence Mode"),
        mig_mode=_value(values, "MIG Mode/Current"),
        # 525 prints the section as "Ecc Mode", other releases as "ECC Mode".
        ecc_mode=_printed(values, "ECC Mode/Current") or _printed(values, "Ecc Mode/Current"),
        ecc=_ecc(values),
        retired_pages_sbe=_int(values, "Retired Pages/Single Bit ECC", "Retired Pages/Single Bit ECC/Count"),
        retired_pages_dbe=_int(values, "Retired Pages/Double Bit ECC", "Retired Pages/Double Bit ECC/Count"),
        retired_pages_pending=_yes(values, "Retired Pages/Pending Page Blacklist",
                                   "Retired Pages/Pending Page Retirement", "Retired Pages/Pending"),
        remapped_rows_correctable=_int(values, "Remapped Rows/Correctable Error"),
        remapped_rows_uncorrectable=_int(values, "Remapped Rows/Uncorrectable Error"),
        remap_pending=_yes(values, "Remapped Rows/Pending"),
        remap_failure=_yes(values, "Remapped Rows/Remapping Failure Occurred"),
        clock_events_active=_clock_events(values),
        temperature_c=_number(values, "Temperature/GPU Current Temp"),
        slowdown_temp_c=_number(values, "Temperature/GPU Slowdown Temp"),
        shutdown_temp_c=_number(values, "Temperature/GPU Shutdown Temp"),
        t_limit_margin_c=_number(values, "Temperature/GPU T.Limit Temp", "Temperature/GPU Current T.Limit Temp"),
        memory_temperature_c=_number(values, "Temperature/Memory Current Temp"),
        memory_max_operating_temp_c=_number(values, "Temperature/Memory Max Operating Temp"),
        power_draw_w=_number(values, "GPU Power Readings/Power Draw", "Power Readings/Power Draw",
                             "GPU Power Readings/Average Power Draw", "Power Readings/Average Power Draw",
                             "GPU Power Readings/Instantaneous Power Draw"),
        power_limit_w=_number(values, "GPU Power Readings/Current Power Limit", "GPU Power Readings/Power Limit",
                              "Power Readings/Power Limit", "Power Readings/Enforced Power Limit"),
        pcie_gen_current=_int(values, "PCI/GPU Link Info/PCIe Generation/Current"),
        pcie_gen_max=_int(values, "PCI/GPU Link Info/PCIe Generation/Max"),
        pcie_width_current=_int(values, "PCI/GPU Link Info/Link Width/Current"),
        pcie_width_max=_int(values, "PCI/GPU Link Info/Link Width/Max"),
        pcie_replays=_int(values, "PCI/Replays Since Reset"),
        reset_required=_yes(values, "GPU Reset Status/Reset Required"),
        drain_and_reset_recommended=_yes(values, "GPU Reset Status/Drain and Reset Recommended"),
        recovery_action=_value(values, "GPU Recovery Action"),
        fabric_state=_value(values, "Fabric/State"), fabric_status=_value(values, "Fabric/Status"),
        fabric_health_summary=_value(values, "Fabric/Health/Summary"),
        fabric_bandwidth=_value(values, "Fabric/Health/Bandwidth"),
        fabric_route_recovery_in_progress=_value(values, "Fabric/Health/Route Recovery in progress"),
        fabric_route_unhealthy=_value(values, "Fabric/Health/Route Unhealthy"),
        fabric_access_timeout_recovery=_value(values, "Fabric/Health/Access Timeout Recovery"),
        fabric_incorrect_configuration=_value(values, "Fabric/Health/Incorrect Configuration"),
        channel_repair_pending=_yes(values, "ECC Errors/Channel Repair Pending"),
        tpc_repair_pending=_yes(values, "ECC Errors/TPC Repair Pending"),
        minor_number=_int(values, "Minor Number"),
        # Last: the reads above collect what they could read only in part.
        notes=tuple(values.notes), unread=tuple(values.unread),
    )


def parse_nvidia_smi_q(text: str) -> NvidiaSmiQuery:
    """Read ``nvidia-smi -q`` (whole, ``-d`` sections, or a clipped paste) into per-GPU health facts.

    Raises ``ParseError`` when the text holds no ``GPU <bus id>`` block and no NVSMI header:
    it is not this tool's output.
    """
    header = GpuValues()
    gpus: list[tuple[str, int, GpuValues]] = []
    lost_gpus: list[str] = []
    stack: list[tuple[int, str]] = []
    seen_header = False
    cleaned = clean(text)
    warnings = cleaned.elision_warnings("lines", "values there are unknown")
    # One pass over ~1,700 lines per host in a fleet health run: each line gets cheap string tests and
    # str.find; the patterns run only on the lines that can match them.
    tabs = any("\t" in line.text for line in cleaned.lines)
    # (ANSI codes and NULs are cut out of lines, and could join two halves of a mark.)
    annotated = any(mark in text for mark in _ANNOTATION_MARKS) or "\x1b" in text or "\x00" in text
    for line in cleaned.lines:
        raw = line.text.expandtabs(4) if tabs else line.text
        if raw.startswith("Unable") and (lost := LOST_GPU.match(raw)):
            lost_gpus.append(f"{lost.group(1)}: {lost.group(2)}")
            continue
        if "NVSMI LOG" in raw:
            seen_header = True
            continue
        if raw.startswith("GPU "):
            gpu = _GPU.match(raw)
            if gpu:
                gpus.append((gpu.group(1), line.number, GpuValues()))
                stack = []
                continue
        body = raw.lstrip()
        indent = len(raw) - len(body)
        if not gpus and not seen_header and "Attached GPUs" not in header and indent == 4:
            # A paste that starts inside a GPU block: its lines belong to a GPU of unknown bus id.
            gpus.append(("", line.number, GpuValues()))
            warnings.append(ParseWarning("the paste starts inside a GPU block (no 'GPU <bus id>' line above it)",
                                         line.number))
        # ``Key : Value``: the key runs to the first colon after its first character.
        colon = body.find(":", 1) if body else -1
        if colon > 0:
            name = body[:colon].rstrip()
        else:
            section = _SECTION.match(raw)
            if not section:
                warnings.append(ParseWarning(f"unrecognised line {raw.strip()[:80]!r}", line.number))
                continue
            name = section.group(2).strip()
        while stack and stack[-1][0] >= indent:
            stack.pop()
        path = f"{stack[-1][1]}/{name}" if stack else name
        value = body[colon + 1:].strip() if colon > 0 else ""
        if value:
            target = gpus[-1][2] if gpus else header
            if path in target:
                continue  # the first value wins: a clipped paste may repeat a section, the tool never does
            target.lines[path] = line.number
            note = _ANNOTATION.search(value) if annotated else None
            if note and note.start() > 0:
                value = value[:note.start()].strip()
                target.note(path, note.group(1))
            target[path] = value
        else:
            stack.append((indent, path))
    if not gpus and not seen_header and "Driver Version" not in header and not lost_gpus:
        raise ParseError(_WHAT, "no 'GPU <bus id>' block and no NVSMI LOG header: not nvidia-smi -q output",
                         line=1)
    attached = _int(header, "Attached GPUs")
    if attached is not None and gpus and attached < len(gpus):
        warnings.append(ParseWarning(f"'Attached GPUs' says {attached} but {len(gpus)} GPU blocks were read"))
    elif attached is not None and gpus and attached > len(gpus) and _looks_cut(gpus):
        # Fewer blocks than GPUs is what 'nvidia-smi -q -i N' prints; only a cut last block is a clipped paste.
        warnings.append(ParseWarning(f"'Attached GPUs' says {attached} but {len(gpus)} GPU block(s) were read and "
                                     "the last one ends early: the paste looks clipped", gpus[-1][1]))
    healths = tuple(_gpu(i, bus or _value(values, "PCI/Bus Id") or "unknown", number, values)
                    for i, (bus, number, values) in enumerate(gpus))
    for health, (_, _, values) in zip(healths, gpus, strict=True):
        warnings += [ParseWarning(f"GPU {health.bus_id}: {path}: value {values[path]!r} not read (expected "
                                  "Yes/No, Enabled/Disabled or Active/Not Active): this fact is unknown",
                                  values.lines.get(path)) for path in health.unread]
    if attached is not None and gpus and attached > len(gpus) and not _looks_cut(gpus):
        # 'nvidia-smi -q -i N' (or -i BUS_ID): the blocks' positions are no indexes of the host's GPUs.
        healths = tuple(dataclasses.replace(h, index_known=False) for h in healths)
    # 610+ drivers print the versions as "KMD Version" and "CUDA UMD Version", and the old names with
    # "[Deprecated; will be removed in CUDA 14.0. ...]" after the version.
    driver = _first_match(header, ("KMD Version", "Driver Version"), _value, _VERSION)
    cuda = _first_match(header, ("CUDA UMD Version", "CUDA Version"), _value, _VERSION)
    return NvidiaSmiQuery(
        driver_version=driver[2].group(0) if driver else None, cuda_version=cuda[2].group(0) if cuda else None,
        gpus=healths, attached_gpus=attached, lost_gpus=tuple(lost_gpus), warnings=tuple(warnings),
    )


def _looks_cut(gpus: list[tuple[str, int, GpuValues]]) -> bool:
    """Whether the last GPU block ends before the tool's own end of a block: a whole block starts with its
    ``Product Name`` and ends with its ``Processes`` entry; a ``-d`` selection has neither (and then the last
    block is as long as the first)."""
    last = gpus[-1][2]
    if any(path == "Processes" or path.startswith("Processes/") for path in last):
        return False
    if len(gpus) > 1:
        return len(last) < len(gpus[0][2])
    return "Product Name" in last


def looks_like_nvidia_smi_q(text: str) -> bool:
    return "NVSMI LOG" in text or bool(re.search(r"^GPU [0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:", text, re.MULTILINE))
