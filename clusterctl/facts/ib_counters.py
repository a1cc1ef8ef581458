"""InfiniBand / RoCE port error counters: sysfs ``counters/`` files (``grep -H .`` over them) and
``perfquery`` (infiniband-diags).

``grep -H . /sys/class/infiniband/*/ports/*/counters/<name>`` prints one
``/sys/class/infiniband/mlx5_0/ports/1/counters/symbol_error:0`` line per file. ``perfquery``
prints ``# Port counters: Lid 4 port 1 ...`` then ``SymbolErrorCounter:..............0`` lines;
its names are mapped to the sysfs ones so both read the same.
"""

from __future__ import annotations

import re

from clusterctl.errors import ParseError
from clusterctl.facts.clean import clean_lines
from clusterctl.facts.health_model import IBCounters, IBPortCounters
from clusterctl.facts.model import ParseWarning
from clusterctl.facts.table import blocks

_SYSFS = re.compile(r"^/sys/class/infiniband/([^/\s]+)/ports/(\d+)/(?:hw_)?counters/(\w+):\s*(\d+)\s*$")
_PERF_HEADER = re.compile(r"^#\s*Port (?:extended )?counters:\s*(?:Lid\s+(\d+)\b)?.*?port\s+(\d+)", re.IGNORECASE)
#: ``SymbolErrorCounter:..............0``; the selectors (``CounterSelect:....0x0000``) are printed in hex.
_PERF_ROW = re.compile(r"^(\w+):\.*\s*(\d+|0x[0-9a-fA-F]+)\s*$")
#: perfquery's rows that say what was asked (``CounterSelect:....0x0000``), not a counter.
_SELECTORS = ("PortSelect", "CounterSelect", "CounterSelect2")
#: perfquery name -> sysfs counter name.
PERFQUERY_NAMES: dict[str, str] = {
    "SymbolErrorCounter": "symbol_error", "LinkErrorRecoveryCounter": "link_error_recovery",
    "LinkDownedCounter": "link_downed", "PortRcvErrors": "port_rcv_errors",
    "PortRcvRemotePhysicalErrors": "port_rcv_remote_physical_errors", "PortXmitDiscards": "port_xmit_discards",
    "LocalLinkIntegrityErrors": "local_link_integrity_errors",
    "ExcessiveBufferOverrunErrors": "excessive_buffer_overrun_errors", "PortXmitWait": "port_xmit_wait",
    "PortRcvSwitchRelayErrors": "port_rcv_switch_relay_errors", "PortXmitConstraintErrors":
    "port_xmit_constraint_errors", "PortRcvConstraintErrors": "port_rcv_constraint_errors",
    "VL15Dropped": "VL15_dropped",
    # the short names older perfquery releases printed for the same counters
    "SymbolErrors": "symbol_error", "LinkRecovers": "link_error_recovery", "LinkDowned": "link_downed",
    "RcvErrors": "port_rcv_errors", "RcvRemotePhysErrors": "port_rcv_remote_physical_errors",
    "RcvSwRelayErrors": "port_rcv_switch_relay_errors", "XmtDiscards": "port_xmit_discards",
    "XmtConstraintErrors": "port_xmit_constraint_errors", "RcvConstraintErrors": "port_rcv_constraint_errors",
    "LinkIntegrityErrors": "local_link_integrity_errors", "ExcBufOverrunErrors": "excessive_buffer_overrun_errors",
    "XmtWait": "port_xmit_wait",
}


def parse_ib_counters(text: str) -> IBCounters:
    """sysfs ``grep -H`` lines or a ``perfquery`` output (told apart by their first data line)."""
    lines = clean_lines(text)
    if any(_PERF_HEADER.match(line.text.strip()) for line in lines[:5]):
        return parse_perfquery(text)
    ports: dict[tuple[str, int], IBPortCounters] = {}
    warnings: list[ParseWarning] = []
    for line in lines:
        match = _SYSFS.match(line.text.strip())
        if not match:
            warnings.append(ParseWarning(f"not a sysfs counter line: {line.text.strip()[:80]!r}", line.number))
            continue
        key = (match.group(1), int(match.group(2)))
        known = ports.get(key)
        counters = {**(known.counters if known else {}), match.group(3): int(match.group(4))}
        ports[key] = IBPortCounters(key[0], key[1], counters, known.line if known else line.number)
    if not ports:
        raise ParseError("ib counters", "no '/sys/class/infiniband/<hca>/ports/<n>/counters/<name>:<value>' line",
                         line=lines[0].number if lines else 1)
    return IBCounters(tuple(ports[k] for k in sorted(ports)), source="sysfs", warnings=tuple(warnings))


def parse_perfquery(text: str) -> IBCounters:
    """``perfquery`` (one or several ports); the HCA is unknown to perfquery, so it is ``lid-<N>``."""
    before, found = blocks(clean_lines(text), lambda line: _PERF_HEADER.match(line.strip()))
    unread = list(before)
    ports: list[IBPortCounters] = []
    for opening, header, lines in found:
        counters: dict[str, int] = {}
        for line in lines:
            row = _PERF_ROW.match(line.text.strip())
            if row is None or (row.group(2).startswith("0x") and row.group(1) not in _SELECTORS):
                unread.append(line)  # hex is how perfquery prints a selector, never a counter
            elif row.group(1) not in _SELECTORS:
                counters[PERFQUERY_NAMES.get(row.group(1), row.group(1))] = int(row.group(2))
        ports.append(IBPortCounters(f"lid-{header.group(1) or '?'}", int(header.group(2)), counters, opening.number))
    if not ports:
        raise ParseError("perfquery", "no '# Port counters: ... port N' header", line=1)
    warnings = tuple(ParseWarning(f"unrecognised line {line.text.strip()[:80]!r}", line.number) for line in unread)
    return IBCounters(tuple(ports), source="perfquery", warnings=warnings)
