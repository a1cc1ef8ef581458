"""Debian packages as the packages phase reads them: versions, holds, apt sources, keyrings.

Pure parsers; recorded outputs in ``tests/fixtures/apt/``.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field

from clusterctl.facts.base import absent_reason
from clusterctl.facts.node import apt_base, parse_os_release
from clusterctl.facts.sections import (
    MARKER_FILES,
    file_sections,
    files_read,
    ls_failed,
    section_command,
    split_sections,
)
from clusterctl.facts.table import read_lines

_WHAT = "package facts"

DPKG_FORMAT = "${Package}\\t${Version}\\t${db:Status-Abbrev}\\n"
_NOT_FOUND = re.compile(r"^dpkg-query: no packages found matching (\S+)$")


@dataclass(frozen=True)
class InstalledPackage:
    name: str
    version: str
    #: dpkg's two/three-letter status, the wanted action then the state: ``ii`` installed, ``hi``
    #: installed and held (``apt-mark hold``), ``rc`` removed with config left...
    status: str

    @property
    def installed(self) -> bool:
        # The second letter is the package's state; the first is only what is wanted of it.
        return self.status[1:2] == "i" and bool(self.version)


def _installed(line: str) -> InstalledPackage | None:
    cells = line.split("\t")
    return InstalledPackage(cells[0], cells[1].strip(), cells[2].strip()) if len(cells) == 3 and cells[0] else None


def parse_dpkg_query(text: str) -> dict[str, InstalledPackage]:
    """``dpkg-query -W -f='${Package}\\t${Version}\\t${db:Status-Abbrev}\\n' NAMES 2>&1``."""
    return {package.name: package for package in read_lines(
        text, "dpkg-query", _installed, "expected 'package<TAB>version<TAB>status'",
        skip=lambda line: _NOT_FOUND.match(line.strip()))}


def parse_showhold(text: str) -> frozenset[str]:
    return frozenset(read_lines(text, "apt-mark showhold", lambda line: None if " " in line.strip() else line.strip(),
                                "expected one package name per line"))


@dataclass(frozen=True)
class PackageFacts:
    os_id: str | None
    #: ``facts.node.apt_base``: ``debian``, ``ubuntu`` or None, and that distribution's codename.
    apt_base: str | None
    codename: str | None
    arch: str | None
    packages: dict[str, InstalledPackage]
    holds: frozenset[str]
    #: Current content of the sources / key files this phase manages (None: absent).
    files: dict[str, str | None] = field(default_factory=dict)
    keyrings: frozenset[str] = frozenset()


def packages_probe(names: tuple[str, ...], files: tuple[str, ...], keyring_dir: str) -> str:
    sections = [
        ("os-release", "cat /etc/os-release"),
        ("arch", "dpkg --print-architecture"),
        ("packages", f"dpkg-query -W -f='{DPKG_FORMAT}' " + " ".join(shlex.quote(n) for n in names)),
        ("holds", "apt-mark showhold"),
        ("keyrings", f"ls -1 {shlex.quote(keyring_dir)}"),
    ]
    sections += file_sections(files)
    return section_command(sections, marker=MARKER_FILES)


def parse_packages_probe(text: str) -> PackageFacts:
    # An absent section reads as empty, which every parser here takes.
    sections = split_sections(text, _WHAT, marker=MARKER_FILES)
    release = sections.read("os-release", parse_os_release) if "=" in sections.text("os-release") else {}
    packages = sections.read("packages", parse_dpkg_query)
    holds = frozenset() if absent_reason(sections.text("holds")) else sections.read("holds", parse_showhold)
    arch = sections.text("arch").strip()
    listing = sections.text("keyrings")
    keyrings = frozenset() if ls_failed(listing) else frozenset(
        line.strip() for line in listing.splitlines() if line.strip())
    return PackageFacts(release.get("ID"), *apt_base(release), arch if re.fullmatch(r"[a-z0-9]+", arch) else None,
                        packages, holds, files_read(sections), keyrings)
