"""Consistent redaction of identifiers in recorded outputs (``clusterctl record --redact``)."""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from clusterctl.inventory.values import ip_literal


@dataclass
class Redactor:
    """Replaces identifiers consistently: one original, one stand-in, everywhere."""

    enabled: bool = True
    mapping: dict[str, str] = field(default_factory=dict)
    counters: dict[str, int] = field(default_factory=dict)

    PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
        ("uuid", re.compile(r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b")),
        ("mac", re.compile(r"\b[0-9a-fA-F]{2}(?::[0-9a-fA-F]{2}){5}\b")),
        # Four groups alone (ibv_devinfo's node_guid), never the half of a GID or IPv6 address.
        ("guid", re.compile(r"(?<![0-9a-fA-F:])[0-9a-fA-F]{4}(?::[0-9a-fA-F]{4}){3}(?![0-9a-fA-F:])")),
        ("ipv4", re.compile(r"(?<![\d.])(?:\d{1,3}\.){3}\d{1,3}(?![\d.])")),
        # After ipv4, whose stand-in an IPv4-mapped GID written with dots already carries.
        ("ipv6", re.compile(r"(?<![\w:.])(?:[0-9a-fA-F]{0,4}:){2,7}(?:[0-9a-fA-F]{1,4}|(?:\d{1,3}\.){3}\d{1,3})?"
                            r"(?![\w:.])")),
    )
    #: What stands before ``1.0.1.1`` in ``MLNX_OFED_LINUX-5.8-1.0.1.1``: a version, not an address.
    VERSION_HEAD = re.compile(r"(?<![\d.])\d+\.\d+-\Z")
    SERIAL = re.compile(r"(?im)(serial(?:[ _-]?number)?\s*[:=]\s*)(\S+)")
    #: Addresses that identify nothing and keep outputs readable.
    KEEP = frozenset({"127.0.0.1", "127.0.0.53", "0.0.0.0", "255.255.255.255", "255.255.255.0", "255.255.0.0",
                      "255.0.0.0"})

    def _stand_in(self, kind: str, original: str) -> str:
        key = f"{kind}:{original.lower()}"
        if key not in self.mapping:
            n = self.counters.get(kind, 0) + 1
            self.counters[kind] = n
            self.mapping[key] = {
                "uuid": f"00000000-0000-4000-8000-{n:012x}",
                "mac": f"02:00:00:{n >> 16 & 255:02x}:{n >> 8 & 255:02x}:{n & 255:02x}",
                "guid": f"0000:0000:0000:{n:04x}",
                "ipv6": f"2001:db8::{n:x}",
                "ipv4": f"192.0.2.{n}" if n < 255 else f"198.51.100.{n - 254}",
                "serial": f"SERIAL{n:06d}",
                "host": f"host-{n}.example.invalid",
            }[kind]
        return self.mapping[key]

    def address(self, value: str) -> str:
        """A host's inventory address: always replaced (names and addresses alike) when redacting, an IP address
        by the stand-in the outputs give it (one they keep, such as a loopback, by one of its own)."""
        if not self.enabled:
            return value
        redacted = self.text(value)
        ip = ip_literal(value)
        return redacted if redacted != value else self._stand_in("host" if ip is None else f"ipv{ip.version}", value)

    def text(self, value: str) -> str:
        if not self.enabled:
            return value
        value = self.SERIAL.sub(lambda m: m.group(1) + self._stand_in("serial", m.group(2)), value)
        for kind, pattern in self.PATTERNS:
            value = pattern.sub(self._replacer(kind), value)
        return value

    def _replacer(self, kind: str) -> Callable[[re.Match[str]], str]:
        def replace(match: re.Match[str]) -> str:
            found = match.group(0)
            # The head is looked for just before the match: from the text's start, a recording full of addresses
            # took time growing with the square of its length.
            head = kind == "ipv4" and self.VERSION_HEAD.search(match.string, max(0, match.start() - 32), match.start())
            if found in self.KEEP or head:
                return found
            return self._ipv6(found) if kind == "ipv6" else self._stand_in(kind, found)

        return replace

    def _ipv6(self, found: str) -> str:
        """A GID or IPv6 address keeps its shape (tune-nccl picks the IPv4-mapped RoCE v2 GID of a replay): the
        IPv4 inside takes the address's stand-in, a link-local one keeps its prefix and redacts its interface
        id (the port GUID), any other is a documentation address."""
        try:
            address = ipaddress.IPv6Address(found)
        except ValueError:
            return found  # not an address (a time, a partial MAC): left as it is
        full = found.count(":") == 7 and "." not in found
        if address.is_loopback or address.is_unspecified or (address.ipv4_mapped and "." in found):
            return found
        if address.ipv4_mapped:
            address = ipaddress.IPv6Address(f"::ffff:{self._stand_in('ipv4', str(address.ipv4_mapped))}")
        elif address.is_link_local:
            low = self._stand_in("guid", ":".join(address.exploded.split(":")[4:])).split(":")
            address = ipaddress.IPv6Address(":".join(address.exploded.split(":")[:4] + low))
        else:
            address = ipaddress.IPv6Address(self._stand_in("ipv6", address.compressed))
        return address.exploded if full else address.compressed
