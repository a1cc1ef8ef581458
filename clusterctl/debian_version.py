"""Debian's version ordering (deb-version(7)), as ``dpkg --compare-versions`` applies it: the one copy,
for the packages phase (is a pin a downgrade?) and the simulated apt-get (which version is newest?)."""

from __future__ import annotations

import re
from functools import cmp_to_key
from itertools import zip_longest

#: A part of a version as runs: non-digits (maybe none), then digits (maybe none).
_RUNS = re.compile(r"(\D*)(\d*)")


def compare_debian_versions(left: str, right: str) -> int:
    """-1, 0 or 1 as dpkg orders two versions (deb-version(7)): epoch, then upstream version, then
    revision; in each, runs of non-digits compare character by character ('~' before everything,
    even the end; letters before other characters), runs of digits compare as numbers."""

    def split(version: str) -> tuple[int, str, str]:
        epoch, _, rest = version.partition(":") if ":" in version else ("0", "", version)
        upstream, _, revision = rest.rpartition("-") if "-" in rest else (rest, "", "")
        return (int(epoch) if epoch.isdigit() else 0), upstream, revision

    def runs(part: str) -> list[tuple[list[int], int]]:
        # Each run of non-digits as its characters' weights ('~' lowest, then the run's end, letters, the
        # rest), then the number its digits make; a part with fewer runs is one with empty runs after them.
        return [([-1 if c == "~" else ord(c) if c.isalpha() else ord(c) + 256 for c in text] + [0], int(digits or 0))
                for text, digits in _RUNS.findall(part)]

    def compare_part(a: str, b: str) -> int:
        for run_a, run_b in zip_longest(runs(a), runs(b), fillvalue=([0], 0)):
            if run_a != run_b:
                return -1 if run_a < run_b else 1
        return 0

    (ea, ua, ra), (eb, ub, rb) = split(left), split(right)
    if ea != eb:
        return -1 if ea < eb else 1
    return compare_part(ua, ub) or compare_part(ra, rb)


#: A sort key (``max(versions, key=debian_version_key)``) in dpkg's order.
debian_version_key = cmp_to_key(compare_debian_versions)
