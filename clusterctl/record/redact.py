"""Consistent redaction of identifiers in recorded outputs (``clusterctl record --redact``)."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass
class Redactor:
    """Replaces identifiers consistently: one original, one stand-in, everywhere."""

    enabled: bool = True
    mapping: dict[str, str] = field(default_factory=dict)
    counters: dict[str, int] = field(default_factory=dict)

    PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
        ("uuid", re.compile(r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b")),
        ("mac", re.compile(r"\b[0-9a-fA-F]{2}(?::[0-9a-fA-F]{2}){5}\b")),
        ("guid", re.compile(r"\b[0-9a-fA-F]{4}(?::[0-9a-fA-F]{4}){3}\b")),
        ("ipv4", re.compile(r"(?<![\d.])(?:\d{1,3}\.){3}\d{1,3}(?![\d.])")),
    )
    SERIAL = re.compile(r"(?im)(serial(?:[ _-]?number)?\s*[:=]\s*)(\S+)")
    #: Addresses that identify nothing and keep outputs readable.
    KEEP = frozenset({"127.0.0.1", "0.0.0.0", "255.255.255.255", "255.255.255.0", "255.255.0.0", "255.0.0.0"})

    def _stand_in(self, kind: str, original: str) -> str:
        key = f"{kind}:{original.lower()}"
        if key not in self.mapping:
            n = self.counters.get(kind, 0) + 1
            self.counters[kind] = n
            self.mapping[key] = {
                "uuid": f"00000000-0000-4000-8000-{n:012x}",
                "mac": f"02:00:00:{n >> 16 & 255:02x}:{n >> 8 & 255:02x}:{n & 255:02x}",
                "guid": f"0000:0000:0000:{n:04x}",
                "ipv4": f"192.0.2.{n}" if n < 255 else f"198.51.100.{n - 254}",
                "serial": f"SERIAL{n:06d}",
                "host": f"host-{n}.example.invalid",
            }[kind]
        return self.mapping[key]

    def address(self, value: str) -> str:
        """A host's inventory address: always replaced (names and addresses alike) when redacting."""
        return self._stand_in("ipv4" if re.fullmatch(r"(?:\d{1,3}\.){3}\d{1,3}", value) else "host", value) \
            if self.enabled else value

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
            return found if found in self.KEEP else self._stand_in(kind, found)

        return replace
