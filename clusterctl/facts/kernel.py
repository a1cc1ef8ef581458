"""Kernel modules, sysctls, swap and fstab as the kernel phase reads them; pure parsers.

Sources of the recorded outputs: ``tests/fixtures/kernel/README.md``.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field

from clusterctl.errors import ParseError
from clusterctl.facts.base import absent_reason
from clusterctl.facts.sections import MARKER_FILES, file_sections, files_read, section_command, split_sections
from clusterctl.facts.table import cells_under_header, numbered_lines, rows_under_header

_WHAT = "kernel facts"


def parse_lsmod(text: str) -> tuple[str, ...]:
    """``lsmod``: the ``Module Size Used by`` header, then ``name size count [users]`` lines."""
    rows = cells_under_header(text, "lsmod", "Module Size Used by",
                              lambda cells: len(cells) >= 3 and cells[1].isdigit(),
                              "expected 'module size used-count [users]'")
    return tuple(cells[0] for cells in rows)


_SYSCTL = re.compile(r"^([A-Za-z0-9_.\-/]+) = (.*)$")
_SYSCTL_MISSING = re.compile(r"^sysctl: cannot stat /proc/sys/(\S+): No such file or directory$")


def parse_sysctl(text: str) -> tuple[dict[str, str], tuple[str, ...]]:
    """``sysctl KEY...`` (stderr joined): values by key, and the keys the kernel does not have."""
    values: dict[str, str] = {}
    missing: list[str] = []
    for line in numbered_lines(text):
        match = _SYSCTL.match(line.text.strip())
        if match:
            values[match.group(1)] = match.group(2).strip()
            continue
        gone = _SYSCTL_MISSING.match(line.text.strip())
        if gone:
            missing.append(gone.group(1).replace("/", "."))
            continue
        raise ParseError("sysctl", "expected 'key = value' or sysctl's 'cannot stat' message", line=line.number,
                         text=line.text)
    return values, tuple(missing)


def parse_swapon_show(text: str) -> tuple[str, ...]:
    """``swapon --show``: nothing when no swap is on, else a ``NAME TYPE SIZE USED PRIO`` table."""
    if not text.strip():
        return ()
    return tuple(row.tokens[0] for row in rows_under_header(text, "swapon --show", "NAME TYPE SIZE USED PRIO"))


@dataclass(frozen=True)
class FstabSwap:
    line: int
    text: str


def fstab_swap_lines(text: str) -> tuple[FstabSwap, ...]:
    """Active (not commented) fstab lines whose type field is ``swap``."""
    return tuple(FstabSwap(number, line) for number, line in enumerate(text.splitlines(), start=1)
                 if not line.lstrip().startswith("#") and line.split()[2:3] == ["swap"])


def comment_out_swap(text: str) -> str:
    """fstab with every active swap line commented, the original line kept after the marker."""
    swaps = {s.line for s in fstab_swap_lines(text)}
    return "".join(f"# clusterctl: swap off for the kubelet: {line}" if number in swaps else line
                   for number, line in enumerate(text.splitlines(keepends=True), start=1))


@dataclass(frozen=True)
class KernelFacts:
    modules: tuple[str, ...] | None
    sysctl: dict[str, str]
    sysctl_missing: tuple[str, ...]
    swaps: tuple[str, ...]
    #: Current content of the files this phase manages (None: no such file).
    files: dict[str, str | None] = field(default_factory=dict)
    missing: dict[str, str] = field(default_factory=dict)


def kernel_probe(sysctl_keys: tuple[str, ...], files: tuple[str, ...]) -> str:
    sections = [("modules", "lsmod"), ("sysctl", "sysctl " + " ".join(shlex.quote(k) for k in sysctl_keys)),
                ("swaps", "swapon --show")]
    sections += file_sections(files)
    return section_command(sections, marker=MARKER_FILES)


def parse_kernel_probe(text: str) -> KernelFacts:
    sections = split_sections(text, _WHAT, marker=MARKER_FILES)
    listing = sections.text("modules")
    # kmod's own failure (a container without /proc/modules: "could not open /proc/modules") lists none either.
    why = absent_reason(listing) or (listing.strip().splitlines()[-1] if "could not open" in listing else None)
    modules = None if why else sections.read("modules", parse_lsmod)
    values, gone = sections.read("sysctl", parse_sysctl)  # an absent section reads as empty: nothing set
    return KernelFacts(modules, values, gone, sections.read("swaps", parse_swapon_show), files_read(sections),
                       {"modules": why} if why else {})
