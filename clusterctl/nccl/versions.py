"""NCCL version numbers as users and tools write them: "2.18.3", "2.18.3-1", "2.21.5+cuda12.4"."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from clusterctl.errors import UsageError

# "v2.18.3-1", "2.21.5+cuda12.4", "2.18" (a release series), "NCCL version 2.19.3+cuda12.3" as NCCL logs it.
_VERSION_RE = re.compile(
    r"^(?:nccl\s+version\s+|nccl[-_ ]?)?v?(?P<major>\d+)\.(?P<minor>\d+)(?:\.(?P<patch>\d+))?"
    r"(?:-(?P<build>\d+))?(?:\+(?P<local>[0-9A-Za-z.\-_]+))?$",
    re.IGNORECASE,
)


@dataclass(frozen=True, order=True)
class NcclVersion:
    """An NCCL release. Ordering ignores the package build ("-1") and the CUDA tag ("+cuda12.4")."""

    major: int
    minor: int
    patch: int = 0

    @property
    def series(self) -> tuple[int, int]:
        """The release series, e.g. (2, 19): the reference table's versions are accurate to the series."""
        return (self.major, self.minor)

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}.{self.patch}"


def try_parse_version(text: str) -> NcclVersion | None:
    """The version in ``text``, or None when it is not one."""
    m = _VERSION_RE.match(text.strip())
    if m is None:
        return None
    return NcclVersion(int(m["major"]), int(m["minor"]), int(m["patch"] or 0))


def distinct(texts: Iterable[str]) -> list[NcclVersion]:
    """The different NCCL versions in ``texts``, oldest first, by version (2.9 before 2.18; "2.18.3-1" and
    "2.18.3+cuda12.2" are one). Texts that are no version are passed over. A fleet's settings must suit the
    first, the oldest: a variable it does not read is ignored on its hosts."""
    return sorted({version for text in texts if (version := try_parse_version(text)) is not None})


def parse_version(text: str) -> NcclVersion:
    """Parse an NCCL version; a user-given text that is not one is a usage error."""
    version = try_parse_version(text)
    if version is None:
        raise UsageError(f"not an NCCL version: {text!r}", hint="Write it like 2.21.5, 2.18.3-1 or 2.21.5+cuda12.4.")
    return version
