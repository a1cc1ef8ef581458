"""``ibdev2netdev`` (RDMA device -> network interface) and ``ip -o -4 addr show`` (IPv4s).

``ibdev2netdev`` prints ``mlx5_0 port 1 ==> ib0 (Up)``; with ``-v`` each line starts with
the PCI address and carries the board description. ``merge_ipv4`` adds the addresses from
``ip -o -4 addr show`` to the interfaces, which RoCE needs to pick a GID.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import replace

from clusterctl.errors import ParseError
from clusterctl.facts.base import Fact
from clusterctl.facts.model import NetDevice

_PLAIN = re.compile(r"^(\S+) port (\d+) ==> (\S+) \((Up|Down)\)\s*$")
_VERBOSE = re.compile(
    r"^[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.\d (\S+) .*? port (\d+) \(.*?\)"
    r" ==> (\S+) \((Up|Down)\)\s*$"
)
_IP_ADDR = re.compile(r"^\d+:\s+(\S+?)(?:@\S+)?\s+inet\s+(\d+\.\d+\.\d+\.\d+)/\d+\b")


def parse_ibdev2netdev(text: str) -> tuple[NetDevice, ...]:
    devices: list[NetDevice] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        match = _PLAIN.match(line) or _VERBOSE.match(line)
        if match is None:
            raise ParseError(
                "ibdev2netdev", "expected '<hca> port <n> ==> <netdev> (Up|Down)'", line=number, text=line
            )
        hca, port, name, state = match.groups()
        devices.append(NetDevice(name=name, hca=hca, port=int(port), up=state == "Up"))
    return tuple(devices)


def parse_ip_addr(text: str) -> dict[str, tuple[str, ...]]:
    """Interface -> its IPv4 addresses, from ``ip -o -4 addr show``."""
    addresses: dict[str, list[str]] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        match = _IP_ADDR.match(line)
        if match is None:
            raise ParseError(
                "ip -o -4 addr show",
                "expected '<n>: <ifname> inet <a.b.c.d>/<len> ...'",
                line=number,
                text=line,
            )
        addresses.setdefault(match.group(1), []).append(match.group(2))
    return {name: tuple(found) for name, found in addresses.items()}


def merge_ipv4(
    devices: Sequence[NetDevice], addresses: Mapping[str, Sequence[str]]
) -> tuple[NetDevice, ...]:
    """The devices with their IPv4s, then the interfaces only ``ip addr`` knows (management ethernet)."""
    known = {device.name for device in devices}
    merged = [replace(d, ipv4=tuple(addresses.get(d.name, d.ipv4))) for d in devices]
    merged += [NetDevice(name=name, ipv4=tuple(found)) for name, found in addresses.items() if name not in known]
    return tuple(merged)


NETDEV: Fact[tuple[NetDevice, ...]] = Fact("netdev", "ibdev2netdev", parse_ibdev2netdev)
IPV4_ADDRS: Fact[dict[str, tuple[str, ...]]] = Fact("ipv4", "ip -o -4 addr show", parse_ip_addr)
