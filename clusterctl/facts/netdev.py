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
from collections.abc import Callable, Mapping, Sequence
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


def _lines_read(text: str, what: str, shape: str, read: Callable[[str], re.Match[str] | None],
                other_family: re.Pattern[str] | None = None) -> tuple[list[re.Match[str]], list[ParseWarning]]:
    """``read``'s match of each cleaned line of ``text``; a line of ``other_family`` is passed over, any other
    line ``read`` cannot read costs that line (a warning naming it), and input with no line read at all is
    refused, naming its first line."""
    found: list[re.Match[str]] = []
    warnings: list[ParseWarning] = []
    lines = clean_lines(text)
    for line in lines:
        match = read(line.text.strip())
        if match is not None:
            found.append(match)
        elif other_family is None or not other_family.match(line.text):
            warnings.append(ParseWarning(f"not '{shape}': {line.text.strip()[:80]!r}", line.number))
    if warnings and len(warnings) == len(lines):
        raise ParseError(what, f"expected '{shape}'", line=lines[0].number, text=lines[0].text)
    return found, warnings


def parse_ibdev2netdev(text: str) -> NetDevices:
    found, warnings = _lines_read(text, "ibdev2netdev", "<hca> port <n> ==> <netdev> (Up|Down)",
                                  lambda line: _PLAIN.match(line) or _VERBOSE.match(line))
    return NetDevices([NetDevice(name=name, hca=hca, port=int(port), up=state == "Up")
                       for hca, port, name, state in (match.groups() for match in found)], tuple(warnings))


def parse_ip_addr(text: str) -> IPv4Addresses:
    """Interface -> its IPv4 addresses, from ``ip -o -4 addr show``."""
    found, warnings = _lines_read(text, "ip -o -4 addr show", "<n>: <ifname> inet <a.b.c.d>/<len> ...",
                                  _IP_ADDR.match, _IP_OTHER_FAMILY)
    addresses: dict[str, list[str]] = {}
    for match in found:
        addresses.setdefault(match.group(1), []).append(match.group(2))
    result = IPv4Addresses({name: tuple(listed) for name, listed in addresses.items()})
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
