"""Compress host names into pdsh-style ranges: gpu01,gpu02,gpu03 -> gpu[01-03]."""

from __future__ import annotations

import re
from collections.abc import Iterable
from itertools import groupby

from clusterctl.errors import BadValue

_NUMBERED = re.compile(r"^(.*?)(\d+)(\D*)$")


def compress(names: Iterable[str]) -> str:
    """Group names that differ only in their last number; keep the others as they are."""
    groups: dict[tuple[str, str, int], list[int]] = {}
    order: list[tuple[str, str, int] | str] = []
    for name in names:
        m = _NUMBERED.match(name)
        if not m:
            order.append(name)
            continue
        key = (m.group(1), m.group(3), len(m.group(2)))
        if key not in groups:
            order.append(key)
        groups.setdefault(key, []).append(int(m.group(2)))
    parts: list[str] = []
    for item in order:
        if isinstance(item, str):
            parts.append(item)
            continue
        prefix, suffix, width = item
        numbers = sorted(set(groups[item]))
        # Consecutive numbers keep the same distance to their place in the list: each run of them is one range.
        runs = [[n for _, n in run] for _, run in groupby(enumerate(numbers), lambda place: place[1] - place[0])]
        ranges = ",".join(f"{r[0]:0{width}d}" + (f"-{r[-1]:0{width}d}" if len(r) > 1 else "") for r in runs)
        parts.append(f"{prefix}{ranges}{suffix}" if len(numbers) == 1 else f"{prefix}[{ranges}]{suffix}")
    return ",".join(parts)


#: pdsh's ``gpu[01-16,20]`` and Ansible's ``gpu[01:16]``: one bracketed range in a name.
_RANGE_PART = re.compile(r"\[([^\[\]]*)\]")
#: Hosts one range or host list may name (ad hoc or in an inventory file): far above any real cluster, low enough
#: that a typo such as ``gpu[1:2000000]`` is an error in a second rather than minutes of work and gigabytes.
MAX_RANGE_HOSTS = 100_000


def expand(spec: str) -> list[str]:
    """``'gpu-[01-03],login1'`` -> gpu-01, gpu-02, gpu-03, login1 (pdsh's and Ansible's forms).

    Commas inside brackets belong to the range; empty items (Ansible's ``'a,b,'``) are
    dropped; duplicates are kept once, in first-seen order; one that cannot be expanded is a ``BadValue``.
    """
    names: dict[str, None] = {}
    for item in re.split(r",(?![^\[]*\])", spec):
        item = item.strip()
        if item:
            for name in _expand_item(item):
                names[name] = None
                if len(names) > MAX_RANGE_HOSTS:
                    raise BadValue(f"the host list names more than {MAX_RANGE_HOSTS:,} hosts.")
    return list(names)


def _expand_item(item: str) -> list[str]:
    m = _RANGE_PART.search(item)
    if m is None:
        if "[" in item or "]" in item:
            raise BadValue(f"unbalanced bracket in {item!r}.")
        return [item]
    head, tail = item[: m.start()], item[m.end() :]
    out: list[str] = []
    for piece in m.group(1).split(","):
        bounds = re.fullmatch(r"\s*(\d+)\s*(?:[-:]\s*(\d+)\s*)?", piece)
        if bounds is None:
            raise BadValue(f"{item!r}: '{piece}' is not a number or a range like 01-16.")
        start, end = bounds.group(1), bounds.group(2) or bounds.group(1)
        if int(end) < int(start):
            raise BadValue(f"{item!r}: the range {piece} goes backwards.")
        if int(end) - int(start) >= MAX_RANGE_HOSTS:
            raise BadValue(f"{item!r}: the range {piece} names more than {MAX_RANGE_HOSTS:,} hosts.")
        for number in padded_numbers(start, end):
            out.extend(_expand_item(f"{head}{number}{tail}"))
    return out


def padded_numbers(start: str, end: str, step: int = 1) -> list[str]:
    """``start`` to ``end`` as a host range writes them: padded to the width of a ``start`` such as ``01``."""
    width = len(start) if start.startswith("0") else 0
    return [str(n).zfill(width) for n in range(int(start), int(end) + 1, step)]


def looks_like_host_list(spec: str) -> bool:
    """An ``-i`` value that names hosts rather than a file: it has a comma (Ansible's ``'a,b,'``)
    or a pdsh range (``gpu[01-16]``), and no file of that name exists."""
    import os

    if os.path.exists(spec):
        return False
    return "," in spec or bool(re.fullmatch(r"[^/\s\[\]]*\[[\d,:\s-]+\][^/\s\[\]]*", spec))
