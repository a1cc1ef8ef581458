"""clusterctl's part of /etc/nccl.conf: one marked block, everything else the site's.

``tune-nccl --push`` replaces only what lies between the markers, so settings an administrator
keeps in the same file survive every push. NCCL reads the file top to bottom and keeps the
*first* value of each variable (``setenv(name, value, 0)`` in NCCL's ``setEnvFile``), so the
block goes first, and a site line that sets one of the block's variables is reported: it is
the block's value that NCCL uses.
"""

from __future__ import annotations

from dataclasses import dataclass

BEGIN = "# BEGIN clusterctl tune-nccl (managed block: replaced by every push; edit outside it)"
END = "# END clusterctl tune-nccl"


@dataclass(frozen=True)
class SiteConflict:
    """A site line outside the block that sets a variable the block also sets."""

    line: int
    name: str
    site_value: str
    block_value: str


def merge_managed_block(current: str | None, block: str) -> tuple[str, list[SiteConflict]]:
    """The new file: the block (between markers) first, then every site line kept as it was."""
    site_lines = _outside_block(current or "")
    while site_lines and not site_lines[0][1].strip():
        site_lines.pop(0)
    body = block.rstrip("\n")
    parts = [BEGIN, body, END] if body else [BEGIN, END]
    content = "\n".join(parts) + "\n"
    if site_lines:
        content += "\n" + "\n".join(text for _, text in site_lines) + "\n"
    ours = _assignments((0, line) for line in body.splitlines())
    conflicts = [
        SiteConflict(number, name, value, ours[name][1])
        for name, (number, value) in _assignments(site_lines).items()
        if name in ours and value != ours[name][1]
    ]
    return content, sorted(conflicts, key=lambda c: c.line)


def _outside_block(text: str) -> list[tuple[int, str]]:
    """(1-based line number, text) of the lines outside clusterctl's block."""
    kept: list[tuple[int, str]] = []
    inside = False
    for number, line in enumerate(text.splitlines(), start=1):
        if line.strip() == BEGIN:
            inside = True
        elif line.strip() == END and inside:
            inside = False
        elif not inside:
            kept.append((number, line))
    return kept


def _assignments(lines: object) -> dict[str, tuple[int, str]]:
    """NAME -> (line, value) of the first ``NAME=value`` line, as NCCL keeps the first."""
    found: dict[str, tuple[int, str]] = {}
    for number, line in lines:  # type: ignore[attr-defined]
        if line.startswith("#") or "=" not in line:
            continue
        name, value = line.split("=", 1)
        found.setdefault(name, (number, value))
    return found
