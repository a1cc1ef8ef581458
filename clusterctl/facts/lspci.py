"""``lspci -vvv``: PCIe link capability vs status (downgrades) and ACS control on bridges.

Each device is a block: ``3b:00.0 3D controller: NVIDIA Corporation ...`` (domain optional)
followed by indented detail lines. What is read: the Express capability's port type
(``Root Port``, ``Downstream Port``...), ``LnkCap``/``LnkSta`` speed and width and their
``(downgraded)`` marks, bridges' ``Bus: primary=.., secondary=.., subordinate=..`` and the ACS
capability's ``ACSCtl:`` flags. Without root, lspci prints ``Capabilities: <access denied>``;
that is kept so the check can say so rather than report ACS as off.
"""

from __future__ import annotations

import re

from clusterctl.errors import ParseError
from clusterctl.facts.clean import Line, clean_lines
from clusterctl.facts.health_model import PciDevice, PciDevices, PciLink
from clusterctl.facts.model import ParseWarning
from clusterctl.facts.table import blocks

#: A device line's address (domain optional) and class, ``3b:00.0 3D controller:`` (``health read`` knows lspci by it).
DEVICE = r"((?:[0-9a-fA-F]{4}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7])\s+([^:]+?):"
_HEADER = re.compile(rf"^{DEVICE}\s*(.*)$")
#: ``Speed unknown`` is a link that is down (``Width x0``), or a speed the lspci predates: its width still counts.
_LINK = re.compile(r"Speed\s+(?:([\d.]+)GT/s|unknown)(?:\s*\((\w+)\))?,\s*Width\s+x(\d+)(?:\s*\((\w+)\))?")
_BUS = re.compile(r"Bus:\s*primary=([0-9a-fA-F]+),\s*secondary=([0-9a-fA-F]+),\s*subordinate=([0-9a-fA-F]+)")
_EXPRESS = re.compile(r"Express \(v\d\) ([A-Za-z ]+?)(?:,|\s*\(|$)")
_ACS_FLAG = re.compile(r"(\w+)([+-])")


def pci_address(text: str | None) -> str | None:
    """THE form GPUs' PCI addresses are compared in, ``dddd:bb:dd`` (domain, bus, device; lower case): nvidia-smi
    prints ``00000000:47:00.0``, the kernel's Xid lines ``PCI:0000:47:00``, lspci ``47:00.0`` (domain 0000 left
    out). The domain is kept: a GB200 tray's GPUs share bus 06 in domains 0008, 0009, 0018 and 0019."""
    found = re.fullmatch(r"(?:pci:)?(?:([0-9a-f]{4,8}):)?([0-9a-f]{2}:[0-9a-f]{2})(?:\.[0-7])?", (text or "").lower())
    return f"{int(found.group(1) or '0', 16):04x}:{found.group(2)}" if found else None


def parse_lspci(text: str) -> PciDevices:
    before, found = blocks(clean_lines(text), lambda raw: _HEADER.match(raw) if not raw[:1].isspace() else None)
    if not found:
        raise ParseError("lspci -vvv", "no '<bus>:<dev>.<fn> <class>: <device>' line", line=1)
    warnings = tuple(ParseWarning(f"line before any device: {line.text.strip()[:80]!r}", line.number)
                     for line in before)
    # Config reads of all ones (header type 7f, 'rev ff'): the device no longer answers, so none of it can be read.
    warnings += tuple(ParseWarning(f"{header.group(1)} does not answer ({line.text.strip()!r}): its link is unknown; "
                                   "it is powered off or has fallen off the bus", line.number)
                      for _, header, lines in found for line in lines if line.text.lstrip().startswith("!!! Unknown"))
    return PciDevices(tuple(_device(opening, header, lines) for opening, header, lines in found), warnings=warnings)


def _device(opening: Line, header: re.Match[str], lines: list[Line]) -> PciDevice:
    address = header.group(1).lower()
    fields: dict[str, object] = {"address": address if address.count(":") == 2 else f"0000:{address}",
                                 "device_class": header.group(2).strip(), "description": header.group(3).strip(),
                                 "line": opening.number}
    for line in lines:
        body = line.text.strip()
        if body.startswith(("LnkCap:", "LnkSta:")) and (link := _LINK.search(body)):
            key = "link_cap" if body.startswith("LnkCap:") else "link_status"
            fields[key] = PciLink(float(link.group(1)) if link.group(1) else None, int(link.group(3)))
            if key == "link_status":
                fields["speed_downgraded"], fields["width_downgraded"] = (link.group(i) == "downgraded" for i in (2, 4))
        elif body.startswith("ACSCtl:"):
            fields["acs_control"] = {name: sign == "+" for name, sign in _ACS_FLAG.findall(body[len("ACSCtl:"):])}
        elif body.startswith("Bus:"):
            bus = _BUS.search(body)
            if bus:
                fields["secondary_bus"], fields["subordinate_bus"] = int(bus.group(2), 16), int(bus.group(3), 16)
        elif body.startswith("Capabilities:"):
            if "<access denied>" in body:
                fields["access_denied"] = True
            express = _EXPRESS.search(body)
            if express:
                fields["port_type"] = express.group(1).strip()
    return PciDevice(**fields)  # type: ignore[arg-type]
