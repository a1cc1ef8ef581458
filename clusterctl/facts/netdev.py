"""``ibdev2netdev`` (RDMA device -> network interface) and ``ip -o -4 addr show`` (IPv4s).

``ibdev2netdev`` prints ``mlx5_0 port 1 ==> ib0 (Up)``; with ``-v`` each line starts with
the PCI address and carries the board description. Piped through ``column -t`` (a common paste)
the words are apart by runs of spaces, and notes often end a line with a ``# comment``.
``merge_ipv4`` adds the addresses from ``ip -o -4 addr show`` to the interfaces, which RoCE needs to pick a GID.

Both go through the shared pre-cleaning (prompts, fences, borders, padding). A line of another
shape costs that line, with a warning naming it; ``inet6`` lines of a pasted ``ip -o addr``
are another family, not an error. Input with nothing readable at all is refused.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import replace

from clusterctl.errors import ParseError
from clusterctl.facts.base import Fact
from clusterctl.facts.clean import clean_lines
from clusterctl.facts.model import IPv4Addresses, NetDevice, NetDevices, ParseWarning

_PLAIN = re.compile(r"^(\S+)\s+port\s+(\d+)\s+==>\s+(\S+)\s+\((Up|Down)\)(?:\s+#.*)?\s*$")
_VERBOSE = re.compile(
    r"^[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.\d (\S+) .*? port (\d+) \(.*?\)"
    r"\s+==>\s+(\S+)\s+\((Up|Down)\)(?:\s+#.*)?\s*$"
)
_IP_ADDR = re.compile(r"^\s*\d+:\s+(\S+?)(?:@\S+)?\s+inet\s+(\d+\.\d+\.\d+\.\d+)/\d+\b")
_IP_OTHER_FAMILY = re.compile(r"^\s*\d+:\s+\S+\s+inet6\s")


def parse_ibdev2netdev(text: str) -> NetDevices:
    devices: list[NetDevice] = []
    warnings: list[ParseWarning] = []
    lines = clean_lines(text)
    for line in lines:
        match = _PLAIN.match(line.text.strip()) or _VERBOSE.match(line.text.strip())
        if match is None:
            warnings.append(ParseWarning(f"not '<hca> port <n> ==> <netdev> (Up|Down)': {line.text.strip()[:80]!r}",
                                         line.number))
            continue
        hca, port, name, state = match.groups()
        devices.append(NetDevice(name=name, hca=hca, port=int(port), up=state == "Up"))
    if warnings and not devices:
        raise ParseError("ibdev2netdev", "expected '<hca> port <n> ==> <netdev> (Up|Down)'", line=lines[0].number,
                         text=lines[0].text)
    return NetDevices(devices, tuple(warnings))


def parse_ip_addr(text: str) -> IPv4Addresses:
    """Interface -> its IPv4 addresses, from ``ip -o -4 addr show``."""
    addresses: dict[str, list[str]] = {}
    warnings: list[ParseWarning] = []
    lines = clean_lines(text)
    read = 0
    for line in lines:
        match = _IP_ADDR.match(line.text)
        if match is None:
            if _IP_OTHER_FAMILY.match(line.text):
                read += 1
                continue
            warnings.append(ParseWarning(f"not '<n>: <ifname> inet <a.b.c.d>/<len> ...': {line.text.strip()[:80]!r}",
                                         line.number))
            continue
        read += 1
        addresses.setdefault(match.group(1), []).append(match.group(2))
    if warnings and not read:
        raise ParseError("ip -o -4 addr show", "expected '<n>: <ifname> inet <a.b.c.d>/<len> ...'",
                         line=lines[0].number, text=lines[0].text)
    result = IPv4Addresses({name: tuple(found) for name, found in addresses.items()})
    result.warnings = tuple(warnings)
    return result


def merge_ipv4(
    devices: Sequence[NetDevice], addresses: Mapping[str, Sequence[str]]
) -> tuple[NetDevice, ...]:
    """The devices with their IPv4s, then the interfaces only ``ip addr`` knows (management ethernet)."""
    known = {device.name for device in devices}
    merged = [replace(d, ipv4=tuple(addresses.get(d.name, d.ipv4))) for d in devices]
    merged += [NetDevice(name=name, ipv4=tuple(found)) for name, found in addresses.items() if name not in known]
    return tuple(merged)


NETDEV: Fact[NetDevices] = Fact("netdev", "ibdev2netdev", parse_ibdev2netdev)
IPV4_ADDRS: Fact[IPv4Addresses] = Fact("ipv4", "ip -o -4 addr show", parse_ip_addr)
