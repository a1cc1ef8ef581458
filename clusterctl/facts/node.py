"""What bootstrap's preflight reads from a node, in one round trip, and the pure parsers.

Each piece has its own parser (tested on outputs recorded on real machines, see
``tests/fixtures/node/README.md``); ``parse_node`` puts them together into ``NodeFacts``. A
piece whose tool is missing is ``None`` with the reason in ``NodeFacts.missing``: preflight
decides whether that matters.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from clusterctl.errors import ParseError
from clusterctl.facts.base import Fact, absent_reason
from clusterctl.facts.nvlink import GPU_LINE
from clusterctl.facts.sections import Section, filled_lines, section_command, split_sections
from clusterctl.facts.table import cells_under_header, numbered_lines, read_lines

_WHAT = "node facts"

NODE_SECTIONS: tuple[tuple[str, str], ...] = (
    # hostname first: a mock profile tells this probe from the stack probe by its first section.
    ("hostname", "hostname"),
    ("os-release", "cat /etc/os-release"),
    ("kernel", "uname -r"),
    ("product-uuid", "cat /sys/class/dmi/id/product_uuid"),
    ("cpus", "nproc"),
    ("meminfo", "grep -E '^(MemTotal|MemAvailable):' /proc/meminfo"),
    ("swaps", "cat /proc/swaps"),
    ("listening", "ss -Htlnp"),
    ("timesync", "timedatectl show -p NTPSynchronized --value"),
    ("nvidia-driver", "cat /sys/module/nvidia/version"),
    ("gpus", "nvidia-smi -L"),
    ("var-lib", "df -Pk /var/lib"),
)

@dataclass(frozen=True)
class Swap:
    name: str
    kind: str
    size_kib: int


@dataclass(frozen=True)
class ListeningSocket:
    address: str
    port: int
    #: Process names from ``ss -p`` (``kube-apiserver``); empty without privileges.
    processes: tuple[str, ...] = ()


@dataclass(frozen=True)
class DiskSpace:
    filesystem: str
    total_kib: int
    available_kib: int
    mounted_on: str


@dataclass(frozen=True)
class NodeFacts:
    os_id: str | None = None
    #: Whose apt archives the OS uses, and their codename (``apt_base``).
    os_apt_base: Literal["debian", "ubuntu"] | None = None
    os_codename: str | None = None
    os_version_id: str | None = None
    os_pretty: str | None = None
    kernel: str | None = None
    hostname: str | None = None
    product_uuid: str | None = None
    cpus: int | None = None
    mem_total_kib: int | None = None
    swaps: tuple[Swap, ...] | None = None
    listening: tuple[ListeningSocket, ...] | None = None
    #: True / False from timedatectl; None when it could not say (no systemd).
    time_synced: bool | None = None
    nvidia_driver: str | None = None
    gpus: tuple[str, ...] | None = None
    var_lib: DiskSpace | None = None
    #: Section -> why it could not be read.
    missing: dict[str, str] = field(default_factory=dict)


def parse_os_release(text: str) -> dict[str, str]:
    """THE reader of os-release(5): ``KEY=value`` lines, the value unquoted as the shell the format is written
    for would (double or single quotes, backslash escapes; an ``=`` in it kept); comments and blank lines
    skipped. A line that is none of these is a ``ParseError`` naming it."""
    values: dict[str, str] = {}
    for line in numbered_lines(text):
        stripped = line.text.strip()
        if stripped.startswith("#"):
            continue
        key, sep, value = stripped.partition("=")
        try:
            words = shlex.split(value)
        except ValueError:  # an unclosed quote
            sep = ""
        if not sep or not re.fullmatch(r"[A-Z0-9_]+", key):
            raise ParseError("os-release", "expected KEY=value", line=line.number, text=line.text)
        values[key] = " ".join(words)
    return values


def apt_base(release: dict[str, str]) -> tuple[str | None, str | None]:
    """THE reading of os-release(5) that apt depends on (bootstrap's OS support and Docker's apt source):
    whose archives the OS uses, ``debian`` or ``ubuntu`` (None: neither), and that distribution's codename.
    A derivative names its base in ID_LIKE, closest first (os-release(5)): Linux Mint's ``ubuntu debian``
    is Ubuntu. Its own VERSION_CODENAME (``xia``) is no Ubuntu release; its UBUNTU_CODENAME (``noble``)
    is, the one Docker's install guide says a derivative uses. A Debian derivative says its base's as
    DEBIAN_CODENAME (LMDE 6: ``faye``, ``bookworm``); one that does not (Kali's ``kali-rolling``, Devuan's
    ``daedalus``, ``excalibur``) names no release of its base: its codename is None."""
    names = [release.get("ID", ""), *release.get("ID_LIKE", "").split()]
    base = next((name for name in names if name in ("debian", "ubuntu")), None)
    if base is None:
        return None, None
    own = release.get("VERSION_CODENAME") if release.get("ID") == base else None
    return base, release.get(f"{base.upper()}_CODENAME") or own or None


def parse_proc_swaps(text: str) -> tuple[Swap, ...]:
    """``/proc/swaps``: a header line, then one active swap area per line."""
    rows = cells_under_header(text, "/proc/swaps", "Filename Type Size Used Priority",
                              lambda cells: len(cells) >= 3 and cells[2].isdigit(),
                              "expected 'name type size used priority'")
    return tuple(Swap(cells[0], cells[1], int(cells[2])) for cells in rows)


_SS_PROC = re.compile(r'\("([^"]+)",pid=')
_MEMINFO = re.compile(r"([A-Za-z0-9_()]+):\s+(\d+)(?:\s+kB)?\s*")


def parse_ss_listening(text: str) -> tuple[ListeningSocket, ...]:
    """``ss -Htlnp``: ``LISTEN recvq sendq local peer [users:(("name",pid=N,fd=N),...)]``."""
    out: list[ListeningSocket] = []
    for line in numbered_lines(text):
        cells = line.tokens
        if len(cells) < 5 or cells[0] != "LISTEN":
            raise ParseError("ss -Htlnp", "expected 'LISTEN recv-q send-q local-address:port peer'",
                             line=line.number, text=line.text)
        local = cells[3]
        address, sep, port = local.rpartition(":")
        if not sep or not port.isdigit():
            raise ParseError("ss -Htlnp", f"no port in the local address {local!r}", line=line.number, text=line.text)
        out.append(ListeningSocket(address, int(port), tuple(_SS_PROC.findall(line.text))))
    return tuple(out)


def parse_meminfo(text: str) -> dict[str, int]:
    """``/proc/meminfo`` lines ``Name:   123 kB`` -> {name: kib}."""
    return {match.group(1): int(match.group(2))
            for match in read_lines(text, "/proc/meminfo", _MEMINFO.fullmatch, "expected 'Name: N kB'")}


def parse_df(text: str) -> DiskSpace:
    """``df -Pk PATH``: the POSIX header, then one line (a long device name never wraps with -P)."""
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines or not lines[0].startswith("Filesystem"):
        raise ParseError("df -Pk", "expected the 'Filesystem 1024-blocks ...' header", line=1,
                         text=lines[0] if lines else "")
    if len(lines) < 2:
        raise ParseError("df -Pk", "no file system line after the header", line=2)
    cells = lines[1].split()
    if len(cells) < 6 or not (cells[1].isdigit() and cells[3].isdigit()):
        raise ParseError("df -Pk", "expected 'fs blocks used available capacity mount'", line=2, text=lines[1])
    return DiskSpace(cells[0], int(cells[1]), int(cells[3]), " ".join(cells[5:]))


def parse_nvidia_smi_list(text: str) -> tuple[str, ...]:
    """``nvidia-smi -L``: ``GPU 0: NVIDIA A100-SXM4-80GB (UUID: GPU-...)`` -> the UUIDs (or names)."""
    return tuple(match.group(3) or match.group(2) for match in read_lines(
        text, "nvidia-smi -L", GPU_LINE.match, "expected 'GPU N: name (UUID: ...)'",
        skip=lambda line: re.match(r"\s+(MIG|Link) ", line)))  # MIG devices are listed under their GPU


GPU_LIST: Fact[tuple[str, ...]] = Fact("gpus", "nvidia-smi -L", parse_nvidia_smi_list)


_DRIVER_VERSION = re.compile(r"^\d+\.\d+(?:\.\d+)?$")


def _one_line(section: Section, fits: Callable[[str], object] = bool, expected: str = "") -> str:
    """The section's one line, which ``fits`` must accept (else ``expected`` says what it should be)."""
    values = filled_lines(section.text)
    if len(values) != 1:
        raise ParseError(_WHAT, f"it should hold one line, it holds {len(values)}", line=1)
    if not fits(values[0]):
        raise ParseError(_WHAT, expected, line=1, text=values[0])
    return values[0]


def parse_node(text: str) -> NodeFacts:
    sections = split_sections(text, _WHAT)
    values: dict[str, object] = {}
    missing: dict[str, str] = {}
    for name, _ in NODE_SECTIONS:
        section = sections.get(name)
        if section is None:
            missing[name] = "section missing from the output"
            continue
        why = absent_reason(section.text)
        if why is not None:
            missing[name] = why
            continue
        with section.reading(_WHAT):
            values.update(_READERS[name](section))
    return NodeFacts(**values, missing=missing)  # type: ignore[arg-type]


def _os_release_fields(section: Section) -> dict[str, object]:
    release = parse_os_release(section.text)
    base, codename = apt_base(release)
    return {"os_id": release.get("ID"), "os_version_id": release.get("VERSION_ID"),
            "os_pretty": release.get("PRETTY_NAME"), "os_apt_base": base, "os_codename": codename}


#: Section -> the ``NodeFacts`` fields read from it.
_READERS: dict[str, Callable[[Section], dict[str, object]]] = {
    "os-release": _os_release_fields,
    "kernel": lambda section: {"kernel": _one_line(section)},
    "hostname": lambda section: {"hostname": _one_line(section)},
    "product-uuid": lambda section: {"product_uuid": _one_line(section).lower()},
    "cpus": lambda section: {"cpus": int(_one_line(section, str.isdigit, "nproc printed no number"))},
    "meminfo": lambda section: {"mem_total_kib": parse_meminfo(section.text).get("MemTotal")},
    "swaps": lambda section: {"swaps": parse_proc_swaps(section.text)},
    "listening": lambda section: {"listening": parse_ss_listening(section.text)},
    "timesync": lambda section: {"time_synced": _one_line(section, lambda v: v in ("yes", "no"),
                                                          "expected 'yes' or 'no'") == "yes"},
    "nvidia-driver": lambda section: {"nvidia_driver": _one_line(section, _DRIVER_VERSION.match,
                                                                 "expected a driver version such as 550.54.15")},
    "gpus": lambda section: {"gpus": parse_nvidia_smi_list(section.text)},
    "var-lib": lambda section: {"var_lib": parse_df(section.text)},
}


NODE_FACTS: Fact[NodeFacts] = Fact("node", section_command(NODE_SECTIONS), parse_node, sudo=True)
