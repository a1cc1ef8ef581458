"""One shape for everything clusterctl has to say about a fleet, a file or a run.

Survey's fleet checks, bench's verdicts, ``nccl lint`` and bootstrap's preflight all report
``Finding`` values: a severity, a stable code (``UPPER_SNAKE``, scripts key on it), what it is
about (a host, ``host/hca``, a link ``a <-> b``, a rack, or a file and line), a message, the fix
to try and the evidence behind it. The CLI prints them one way and maps them to exit codes one
way (an error-level finding means exit 1).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from clusterctl.plain_json import to_plain


class Severity(str, Enum):
    ERROR = "error"
    WARNING = "warning"
    INFO = "info"

    def __str__(self) -> str:
        # "error", not "Severity.ERROR", wherever a severity lands in text (f-strings, logs).
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)

    @property
    def rank(self) -> int:
        """0 for the most severe, so that sorting puts errors first."""
        return _RANK[self]


_RANK = {Severity.ERROR: 0, Severity.WARNING: 1, Severity.INFO: 2}


@dataclass(frozen=True)
class Finding:
    severity: Severity
    #: Stable identifier in UPPER_SNAKE style, e.g. ``NVLINK_MISSING``, ``LINK_SLOW``, ``UNKNOWN_VARIABLE``.
    code: str
    message: str
    #: The host it is about, when it is about one.
    host: str | None = None
    #: Narrower than the host, or instead of one: ``mlx5_2``, ``gpu-a1 <-> gpu-b1``, ``rack a``, ``NCCL_IB_HCA``.
    subject: str | None = None
    #: The settings file and 1-based line, for findings about files.
    file: str | None = None
    line: int | None = None
    #: What to do about it.
    fix: str = ""
    #: The facts that led to it (figures, expected vs seen): plain JSON-able values.
    evidence: Mapping[str, Any] = field(default_factory=dict)

    @property
    def where(self) -> str:
        """Where it is, as a person would write it: ``gpu-a1 mlx5_2`` or ``job.slurm:12``."""
        if self.file:
            return f"{self.file}:{self.line}" if self.line is not None else self.file
        return " ".join(p for p in (self.host, self.subject) if p) or "fleet"

    def sort_key(self) -> tuple[int, str, int, str, str]:
        return (self.severity.rank, self.file or self.host or "", self.line or 0, self.code, self.message)

    @property
    def label(self) -> str:
        """``where`` plus the subject when the finding is about a file (the variable on that line)."""
        if self.file and self.subject:
            return f"{self.where} {self.subject}"
        return self.where

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"severity": self.severity.value, "code": self.code, "message": self.message}
        for key in ("host", "subject", "file", "line"):
            value = getattr(self, key)
            if value is not None:
                data[key] = value
        if self.fix:
            data["fix"] = self.fix
        if self.evidence:
            data["evidence"] = to_plain(self.evidence)
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Finding:
        """Read back what ``to_json`` wrote (``hint`` is accepted for ``fix``: survey schema version 1)."""
        return cls(
            Severity(data["severity"]), str(data["code"]), str(data["message"]), host=data.get("host"),
            subject=data.get("subject"), file=data.get("file"), line=data.get("line"),
            fix=str(data.get("fix", data.get("hint", "")) or ""), evidence=dict(data.get("evidence") or {}),
        )


#: The version of the one JSON shape of a finding (``Finding.to_json``), for payloads that carry findings.
#: Version 1 was each command's own shape (survey ``hint``, bench kebab-case codes, lint ``variable``).
FINDINGS_SCHEMA_VERSION = 2



def sorted_findings(findings: Iterable[Finding]) -> list[Finding]:
    return sorted(findings, key=Finding.sort_key)


def count_by_severity(findings: Iterable[Finding]) -> dict[str, int]:
    """``{"error": n, "warning": n, "info": n}``, every severity present."""
    severities = [f.severity for f in findings]
    return {s.value: severities.count(s) for s in Severity}


def fails(findings: Iterable[Finding], *, strict: bool = False) -> bool:
    """Whether these findings make a command exit 1: any error, or with ``strict`` any warning too."""
    worst = {Severity.ERROR, Severity.WARNING} if strict else {Severity.ERROR}
    return any(f.severity in worst for f in findings)
