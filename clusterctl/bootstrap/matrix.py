"""Which Kubernetes releases kubeadm still supports, and which containerd each one needs.

Sources: containerd ``RELEASES.md`` "Kubernetes Support" table (1.30 to 1.33 as published;
1.34 as the release/2.3 branch's table gives it and as several public runbooks quote it; 1.32
to 1.37 as containerd v2.4.2's RELEASES.md gives them, read from its module on the Go module
proxy 2026-12-01). Kubernetes supports its three newest minors; 1.37
was released 2026-08. A minor missing from the table is reported as unknown, not guessed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from clusterctl.inventory.pins import NEWEST_KUBERNETES

#: How many minors upstream supports at once (the newest is ``inventory.pins.NEWEST_KUBERNETES``).
SUPPORTED_MINORS = 3

#: Kubernetes minor -> the containerd releases (minimum patch per containerd minor) it supports.
CONTAINERD_FOR_KUBERNETES: dict[tuple[int, int], tuple[tuple[int, int, int], ...]] = {
    (1, 30): ((2, 1, 0), (2, 0, 0), (1, 7, 13), (1, 6, 28)),
    (1, 31): ((2, 1, 0), (2, 0, 0), (1, 7, 20), (1, 6, 34)),
    (1, 32): ((2, 1, 0), (2, 0, 1), (1, 7, 24), (1, 6, 36)),
    (1, 33): ((2, 1, 0), (2, 0, 4), (1, 7, 24), (1, 6, 36)),
    (1, 34): ((2, 1, 3), (2, 0, 6), (1, 7, 28), (1, 6, 39)),
    (1, 35): ((2, 2, 0), (2, 1, 5), (1, 7, 28)),
    (1, 36): ((2, 3, 0), (2, 2, 0)),
    (1, 37): ((2, 4, 0), (2, 3, 0)),
}

_VERSION = re.compile(r"^v?(\d+)\.(\d+)(?:\.(\d+))?")


def parse_version(text: str) -> tuple[int, int, int] | None:
    """``1.36.2`` / ``v2.2.1`` / ``2.2.1-1~ubuntu`` / ``1.6.20~ds1`` -> (major, minor, patch)."""
    match = _VERSION.match(text.strip())
    if not match:
        return None
    return int(match.group(1)), int(match.group(2)), int(match.group(3) or 0)


def show(version: tuple[int, ...]) -> str:
    return ".".join(str(p) for p in version)


@dataclass(frozen=True)
class MatrixVerdict:
    #: False: refused (an error); True with a message: not in the table, a warning.
    ok: bool
    message: str


def kubernetes_supported(kubernetes: str) -> MatrixVerdict:
    """Whether kubeadm upstream still supports this Kubernetes minor."""
    version = parse_version(kubernetes)
    if version is None:
        return MatrixVerdict(False, f"'{kubernetes}' is not a Kubernetes version")
    minor = version[:2]
    oldest = (NEWEST_KUBERNETES[0], NEWEST_KUBERNETES[1] - SUPPORTED_MINORS + 1)
    if minor < oldest:
        return MatrixVerdict(False, f"Kubernetes {show(minor)} is out of support (supported: "
                             f"{show(oldest)} to {show(NEWEST_KUBERNETES)})")
    if minor > NEWEST_KUBERNETES:
        return MatrixVerdict(True, f"Kubernetes {show(minor)} is newer than clusterctl knows "
                             f"({show(NEWEST_KUBERNETES)})")
    return MatrixVerdict(True, "")


def containerd_supports(kubernetes: str, containerd: str) -> MatrixVerdict:
    """Whether the containerd release is one containerd's table lists for this Kubernetes minor."""
    k = parse_version(kubernetes)
    c = parse_version(containerd)
    if k is None or c is None:
        return MatrixVerdict(False, f"cannot compare Kubernetes '{kubernetes}' with containerd '{containerd}'")
    needs = CONTAINERD_FOR_KUBERNETES.get(k[:2])
    if needs is None:
        return MatrixVerdict(True, f"containerd's support table has no row for Kubernetes {show(k[:2])}")
    if any(c[:2] == minimum[:2] and c >= minimum for minimum in needs):
        return MatrixVerdict(True, "")
    wanted = " or ".join(f"{show(m)}+" for m in needs)
    return MatrixVerdict(False, f"Kubernetes {show(k[:2])} needs containerd {wanted}; "
                         f"containerd {show(c)} is pinned")
