"""The kernel log (``journalctl -k``, ``dmesg``, syslog, pasted excerpts): NVRM Xid, NVSwitch SXid
and "fallen off the bus" lines.

A log is mostly lines that do not matter here, so unrecognised lines are skipped, never
errors; but a line that looks like one read here (``NVRM: Xid``, ``SXid``) and cannot be read, a
fallen-off-the-bus message that names no GPU, and the author's ``...`` are warnings naming the line.
Every timestamp style real hosts print is accepted in front of the message:
journalctl ``-o short-iso`` / ``short`` / ``short-precise``, ``dmesg -T`` (``[Sun Feb 23 16:24:18 2025]``), plain
``dmesg`` (``[ 1234.567890]``), ``dmesg --time-format iso``, ``dmesg -x`` facility prefixes
(``kern  :warn  :``) and syslog. A GPU can fall off the bus without any Xid line
(``NVRM: GPU 0000:3b:00.0: GPU has fallen off the bus.``), so that phrase is its own event.
"""

from __future__ import annotations

import re

from clusterctl.facts.clean import clean
from clusterctl.facts.health_model import KernelEvent, KernelLog
from clusterctl.facts.model import ParseWarning

#: A PCI address as the kernel logs it (``0000:3b:00`` or ``0000:3b:00.0``).
_PCI_ADDRESS = r"[0-9A-Fa-f]{4}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}(?:\.[0-9A-Fa-f])?"
#: The lines that carry a code, by event kind: PCI address, code, message. On a MIG GPU the driver adds
#: the GPU and compute instance the error is attributed to (``(PCI:0000:01:00 GPU-I:05 GPU-CI:02)``).
_CODED = tuple((kind, re.compile(rf"{source} \((?:PCI:)?({_PCI_ADDRESS})(?: GPU-C?I:\d+)*\):\s*(\d+)(?:,\s*(.*))?$"))
               for kind, source in (("xid", r"NVRM: Xid"), ("sxid", r"nvidia-nvswitch\d*: SXid")))
_CODED_LIKE = re.compile(r"NVRM: Xid|nvidia-nvswitch\d*: SXid")
_FALLEN = re.compile(r"fallen off the bus", re.IGNORECASE)
_PCI = re.compile(f"({_PCI_ADDRESS})")
#: The first line of the driver's message spread over lines ("NVRM: The NVIDIA GPU 0000:b3:00.0" / "NVRM: (PCI ID:
#: 10de:26b5) installed in this system has" / "NVRM: fallen off the bus and is not responding to commands."): it
#: names the GPU the last line, which has no address, is about.
_NAMED_GPU = re.compile(rf"NVRM: The NVIDIA GPU ({_PCI_ADDRESS})")
_STAMPS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("journalctl", re.compile(r"^(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:[+-]\d{2}:?\d{2}|Z)?)\s")),
    ("dmesg", re.compile(r"^\[([A-Z][a-z]{2} [A-Z][a-z]{2} [ \d]\d \d{2}:\d{2}:\d{2} \d{4})\]\s")),
    ("dmesg", re.compile(r"^\[\s*(\d+\.\d+)\]\s")),
    ("syslog", re.compile(r"^([A-Z][a-z]{2} [ \d]\d \d{2}:\d{2}:\d{2}(?:\.\d+)?)\s")),
)
_FACILITY = re.compile(r"^(?:kern|user|daemon|syslog)\s*:\s*\w+\s*:\s*")
_UNREADABLE = (
    "No journal files were opened due to insufficient permissions",
    "No journal files were found",
    "You are currently not seeing messages from",  # journalctl's hint: a user outside the journal's groups
    "read kernel buffer failed",
    "Operation not permitted",
)


def _timestamp(text: str) -> tuple[str | None, str | None]:
    """(source, timestamp) of a line, from the first timestamp style that matches."""
    body = _FACILITY.sub("", text)
    for source, pattern in _STAMPS:
        match = pattern.match(body)
        if match:
            return source, match.group(1)
    return None, None


def parse_kernel_log(text: str) -> KernelLog:
    """GPU-health events of a kernel log, in order. Never raises: a log without them has none."""
    events: list[KernelEvent] = []
    sources: dict[str, int] = {}
    unreadable: str | None = None
    named: tuple[str, str | None] | None = None  # the GPU and timestamp of "NVRM: The NVIDIA GPU ..."
    lines = (pasted := clean(text)).lines
    warnings = pasted.elision_warnings("lines", "GPU events there are unknown")
    for line in lines:
        raw = line.text.strip()
        source, stamp = _timestamp(raw)
        if source:
            sources[source] = sources.get(source, 0) + 1
        if unreadable is None and not events and any(marker in raw for marker in _UNREADABLE):
            unreadable = raw[:200]
        evidence = raw[:400]
        coded = next(((kind, found) for kind, pattern in _CODED if (found := pattern.search(raw))), None)
        if coded:
            kind, found = coded
            events.append(KernelEvent(kind, line.number, evidence, stamp, found.group(1).lower(), int(found.group(2)),
                                      (found.group(3) or "").strip()))
        elif _FALLEN.search(raw) and ("NVRM" in raw or "nvidia" in raw.lower()):
            pci = _PCI.search(raw.split("NVRM", 1)[-1])
            # Without an address, the last line of the driver's message: its first line named the GPU.
            address, when = (pci.group(1).lower(), stamp) if pci else named or (None, None)
            events.append(KernelEvent("fallen-off-bus", line.number, evidence, stamp or when, address, None, raw))
            named = None
            if address is None:
                warnings.append(ParseWarning("a GPU fell off the bus, but no line of the paste names which "
                                             "('NVRM: The NVIDIA GPU <address>' is not there)", line.number))
        elif found := _NAMED_GPU.search(raw):
            named = (found.group(1).lower(), stamp)
        elif _CODED_LIKE.search(raw):
            warnings.append(ParseWarning("an Xid line not read: no '(PCI:<address>): <code>' where the driver "
                                         "prints them", line.number))
    source = max(sources, key=lambda s: sources[s]) if sources else "unknown"
    if events:
        unreadable = None
    return KernelLog(tuple(events), source=source, unreadable=unreadable, lines=len(lines), warnings=tuple(warnings))
