"""``kubeadm certs check-expiration``: the certificates kubeadm manages on a control plane and their CAs.

kubeadm prints two tables with Go's tabwriter (``cmd/kubeadm/app/cmd/certs.go``): the
certificates (``CERTIFICATE  EXPIRES  RESIDUAL TIME  CERTIFICATE AUTHORITY  EXTERNALLY MANAGED``)
and, from 1.17, their authorities (``CERTIFICATE AUTHORITY  EXPIRES  RESIDUAL TIME  EXTERNALLY
MANAGED``). Columns are read at the header's offsets (a kubeconfig's CA cell may be blank);
the date is ``Jan 02, 2006 15:04 UTC``; an expired certificate's residual time is ``<invalid>``.
A certificate or CA whose file is not there is a row ``!MISSING! NAME`` with no other cell (all of
them before ``kubeadm init``; the etcd ones where kubeadm falls back to its default configuration).
Lines before the first header (``[check-expiration] Reading configuration...``) are skipped.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone

from clusterctl.errors import ParseError

COMMAND = "kubeadm certs check-expiration"
WHAT = "kubeadm certs check-expiration"
CERT_COLUMNS = ("CERTIFICATE", "EXPIRES", "RESIDUAL TIME", "CERTIFICATE AUTHORITY", "EXTERNALLY MANAGED")
CA_COLUMNS = ("CERTIFICATE AUTHORITY", "EXPIRES", "RESIDUAL TIME", "EXTERNALLY MANAGED")


@dataclass(frozen=True)
class CertExpiry:
    name: str
    expires: datetime
    #: As kubeadm printed it (``348d``, ``9y``, ``<invalid>``).
    residual: str
    #: The CA that signed it; "" for an authority itself (and for kubeconfigs before 1.23).
    authority: str
    externally_managed: bool

    def days_left(self, now: datetime) -> int:
        return int((self.expires - now).total_seconds() // 86400)


@dataclass(frozen=True)
class CertExpiration:
    certificates: tuple[CertExpiry, ...]
    authorities: tuple[CertExpiry, ...] = field(default_factory=tuple)
    #: Certificates and CAs kubeadm lists as ``!MISSING!``, in its order.
    missing: tuple[str, ...] = ()

    def soonest(self) -> CertExpiry | None:
        return min(self.certificates, key=lambda c: c.expires, default=None)


def _offsets(header: str, columns: tuple[str, ...], number: int) -> list[int]:
    offsets: list[int] = []
    start = 0
    for column in columns:
        at = header.find(column, start)
        if at < 0:
            raise ParseError(WHAT, f"the header has no {column!r} column", line=number, text=header)
        offsets.append(at)
        start = at + len(column)
    return offsets


def _cells(line: str, offsets: list[int]) -> list[str]:
    bounds = [*offsets[1:], None]
    return [line[a:b].strip() for a, b in zip(offsets, bounds, strict=True)]


def _date(text: str, number: int, line: str) -> datetime:
    try:
        return datetime.strptime(text, "%b %d, %Y %H:%M UTC").replace(tzinfo=timezone.utc)
    except ValueError:
        raise ParseError(WHAT, f"{text!r} is not a date like 'Apr 09, 2024 09:17 UTC'", line=number,
                         text=line) from None


def _yes_no(text: str, number: int, line: str) -> bool:
    if text not in ("yes", "no"):
        raise ParseError(WHAT, f"EXTERNALLY MANAGED is {text!r}, not yes or no", line=number, text=line)
    return text == "yes"


def parse_check_expiration(text: str) -> CertExpiration:
    certificates: list[CertExpiry] = []
    authorities: list[CertExpiry] = []
    missing: list[str] = []
    table: list[CertExpiry] | None = None
    offsets: list[int] = []
    is_ca_table = False
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if stripped.startswith("CERTIFICATE") and "EXPIRES" in stripped:
            is_ca_table = stripped.startswith("CERTIFICATE AUTHORITY")
            offsets = _offsets(line, CA_COLUMNS if is_ca_table else CERT_COLUMNS, number)
            table = authorities if is_ca_table else certificates
            continue
        if not stripped or table is None:
            continue  # kubeadm's "[check-expiration] ..." lines and blank lines between tables
        if stripped.startswith("!MISSING!"):
            name = stripped.removeprefix("!MISSING!").strip()
            if not name or " " in name:
                raise ParseError(WHAT, "expected '!MISSING! NAME'", line=number, text=line)
            missing.append(name)
            continue
        cells = _cells(line, offsets)
        if not cells[0] or not cells[1]:
            raise ParseError(WHAT, "a row without a name or a date", line=number, text=line)
        expires = _date(cells[1], number, line)
        # EXTERNALLY MANAGED is the last column of both tables; only certificates name their authority.
        authority = "" if is_ca_table else cells[3]
        table.append(CertExpiry(cells[0], expires, cells[2], authority, _yes_no(cells[-1], number, line)))
    if not certificates and not missing:
        raise ParseError(WHAT, "no certificate table (no 'CERTIFICATE  EXPIRES ...' header)")
    return CertExpiration(tuple(certificates), tuple(authorities), tuple(missing))
