"""Compress host names into pdsh-style ranges: gpu01,gpu02,gpu03 -> gpu[01-03]."""

from __future__ import annotations

import re
from collections.abc import Iterable

_NUMBERED = re.compile(r"^(.*?)(\d+)(\D*)$")


def compress(names: Iterable[str]) -> str:
    """Group names that differ only in their last number; keep the others as they are."""
    groups: dict[tuple[str, str, int], list[int]] = {}
    plain: list[str] = []
    order: list[tuple[str, str, int] | str] = []
    for name in names:
        m = _NUMBERED.match(name)
        if not m:
            plain.append(name)
            order.append(name)
            continue
        key = (m.group(1), m.group(3), len(m.group(2)))
        if key not in groups:
            groups[key] = []
            order.append(key)
        groups[key].append(int(m.group(2)))
    parts: list[str] = []
    for item in order:
        if isinstance(item, str):
            parts.append(item)
            continue
        prefix, suffix, width = item
        numbers = sorted(set(groups[item]))
        if len(numbers) == 1:
            parts.append(f"{prefix}{numbers[0]:0{width}d}{suffix}")
            continue
        ranges: list[str] = []
        start = prev = numbers[0]
        for n in [*numbers[1:], None]:
            if n is not None and n == prev + 1:
                prev = n
                continue
            ranges.append(f"{start:0{width}d}" if start == prev else f"{start:0{width}d}-{prev:0{width}d}")
            if n is not None:
                start = prev = n
        parts.append(f"{prefix}[{','.join(ranges)}]{suffix}")
    return ",".join(parts)
