"""Debian's version ordering (deb-version(7)), as ``dpkg --compare-versions`` applies it: the one copy,
for the packages phase (is a pin a downgrade?) and the simulated apt-get (which version is newest?)."""

from __future__ import annotations

from functools import cmp_to_key


def compare_debian_versions(left: str, right: str) -> int:
    """-1, 0 or 1 as dpkg orders two versions (deb-version(7)): epoch, then upstream version, then
    revision; in each, runs of non-digits compare character by character ('~' before everything,
    even the end; letters before other characters), runs of digits compare as numbers."""

    def split(version: str) -> tuple[int, str, str]:
        epoch, _, rest = version.partition(":") if ":" in version else ("0", "", version)
        upstream, _, revision = rest.rpartition("-") if "-" in rest else (rest, "", "")
        return (int(epoch) if epoch.isdigit() else 0), upstream, revision

    def order(char: str) -> int:
        if char == "~":
            return -1
        if char.isalpha():
            return ord(char)
        return ord(char) + 256

    def compare_part(a: str, b: str) -> int:
        i = j = 0
        while i < len(a) or j < len(b):
            while (i < len(a) and not a[i].isdigit()) or (j < len(b) and not b[j].isdigit()):
                ca = order(a[i]) if i < len(a) and not a[i].isdigit() else 0
                cb = order(b[j]) if j < len(b) and not b[j].isdigit() else 0
                if ca != cb:
                    return -1 if ca < cb else 1
                i, j = i + 1, j + 1
            start_a, start_b = i, j
            while i < len(a) and a[i].isdigit():
                i += 1
            while j < len(b) and b[j].isdigit():
                j += 1
            na, nb = int(a[start_a:i] or 0), int(b[start_b:j] or 0)
            if na != nb:
                return -1 if na < nb else 1
        return 0

    (ea, ua, ra), (eb, ub, rb) = split(left), split(right)
    if ea != eb:
        return -1 if ea < eb else 1
    return compare_part(ua, ub) or compare_part(ra, rb)


#: A sort key (``max(versions, key=debian_version_key)``) in dpkg's order.
debian_version_key = cmp_to_key(compare_debian_versions)
