"""The health check's shapes: options in, one verdict per host out."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from clusterctl.errors import UsageError
from clusterctl.findings import Finding, Severity, sorted_findings
from clusterctl.wording import more_codes


class Verdict(str, Enum):
    HEALTHY = "healthy"
    #: Watch it: something is off (a warning) but the host can keep its jobs.
    DEGRADED = "degraded"
    #: Take it out of service: at least one error-level finding.
    UNHEALTHY = "unhealthy"
    #: It could not be checked (unreachable, timed out): not known to be healthy.
    UNKNOWN = "unknown"

    def __str__(self) -> str:
        return self.value

    @property
    def rank(self) -> int:
        """Higher is worse (``health compare`` says a host got worse when this grows)."""
        return _RANK[self]


_RANK = {Verdict.HEALTHY: 0, Verdict.DEGRADED: 1, Verdict.UNKNOWN: 2, Verdict.UNHEALTHY: 3}

_SINCE = re.compile(r"^(\d+)\s*([smhdw])$")
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def since_seconds(value: str, what: str = "--since") -> int:
    """``24h`` -> 86400. Accepts s, m, h, d, w; anything else is a usage error naming ``what`` (the flag,
    or the setting of a config file)."""
    match = _SINCE.match(value.strip().lower())
    if not match or int(match.group(1)) == 0:
        raise UsageError(f"{what} takes a duration such as 30m, 24h or 7d, got {value!r}")
    return int(match.group(1)) * _UNIT_S[match.group(2)]


#: The Slurm health check's bound: Slurm stops a HealthCheckProgram after 60 s; this leaves room for scontrol.
#: Here, not in ``agent.slurm_check``, so that the node agent's command line reads it without loading the check.
SLURM_CHECK_DEADLINE_S = 50.0


@dataclass(frozen=True)
class HealthOptions:
    """What ``run_health`` checks, and how long it waits."""

    #: 0: reads only (seconds, safe while jobs run); 1-3: plus ``dcgmi diag -r N``; 2+: plus nccl-tests.
    level: int = 0
    #: How far back the kernel log is read: ``30m``, ``24h``, ``7d``.
    since: str = "24h"
    #: Each probe command's own limit on the host (a hung nvidia-smi is stopped and reported).
    probe_timeout_s: float = 30.0
    #: ``dcgmi diag`` limit (level 3 takes tens of minutes on 8 GPUs).
    dcgm_timeout_s: float = 3600.0
    #: nccl-tests at level 2+ (single host, all its GPUs).
    nccl_op: str = "all_reduce"
    nccl_max_bytes: str = "8G"
    nccl_binary_dir: str | None = None
    #: Run the invasive checks (level 2+) even beside compute processes or GPU pods (``--force``).
    force: bool = False

    def __post_init__(self) -> None:
        if self.level not in (0, 1, 2, 3):
            raise UsageError(f"--level takes 0, 1, 2 or 3, got {self.level}")
        since_seconds(self.since)

    @property
    def since_s(self) -> int:
        return since_seconds(self.since)


@dataclass(frozen=True)
class HostHealth:
    host: str
    verdict: Verdict
    #: One line: why the verdict (the worst finding), or "all checks passed".
    reason: str
    findings: tuple[Finding, ...] = ()
    #: Why the host could not be checked (unreachable, timed out).
    failure: str | None = None
    #: What was read, kept for ``health compare`` (counters, Xids, link states): plain JSON values.
    facts: dict[str, Any] = field(default_factory=dict)
    #: ``health read`` only: each parser's whole typed result as plain JSON, by probe (``smi``, ``rdma``...),
    #: with the file it came from and what could not be read (docs/health.md, "JSON").
    readings: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """Whether the host may take (or go back to) work: healthy, nothing worse than info."""
        return self.verdict is Verdict.HEALTHY

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"host": self.host, "verdict": self.verdict.value, "reason": self.reason,
                                "findings": [f.to_json() for f in sorted_findings(self.findings)]}
        if self.failure:
            data["failure"] = self.failure
        data["facts"] = self.facts
        if self.readings:
            data["readings"] = self.readings
        return data


def verdict_of(findings: tuple[Finding, ...] | list[Finding], failure: str | None = None, *,
               results: tuple[Finding, ...] | list[Finding] = ()) -> tuple[Verdict, str]:
    """The verdict of a host from its findings, and the one-line reason.

    ``results``: the findings that are results of tests run on the host (the DCGM diagnostic,
    nccl-tests). At one severity the reason names a finding about the host's own state first
    (``NVLINK_DOWN``): a test result (``FIGURE_IMPOSSIBLE``) is what that cause does, so the cause
    heads the line and the others are named after it.
    """
    if failure:
        return Verdict.UNKNOWN, f"could not be checked: {failure}"
    ordered = sorted_findings(findings)
    worst = ordered[0] if ordered else None
    if worst is None or worst.severity is Severity.INFO:
        return Verdict.HEALTHY, "all checks passed"
    verdict = Verdict.UNHEALTHY if worst.severity is Severity.ERROR else Verdict.DEGRADED
    tests = {id(f) for f in results}
    same = [f for f in ordered if f.severity is worst.severity]
    head = next((f for f in same if id(f) not in tests), same[0])
    more = more_codes([f.code for f in same if f is not head])
    subject = f"{head.subject}: " if head.subject else ""
    return verdict, f"{head.code}: {subject}{head.message}{more}"


@dataclass(frozen=True)
class HealthReport:
    hosts: tuple[HostHealth, ...]
    generated_at: str
    level: int
    since: str
    inventory: str | None = None
    source: str = "health"

    @property
    def findings(self) -> list[Finding]:
        return sorted_findings([f for h in self.hosts for f in h.findings])

    def host(self, name: str) -> HostHealth | None:
        return next((h for h in self.hosts if h.host == name), None)

    def counts(self) -> dict[str, int]:
        return {v.value: sum(1 for h in self.hosts if h.verdict is v) for v in Verdict}

    @property
    def ok(self) -> bool:
        """Every host healthy: the command exits 0."""
        return all(h.ok for h in self.hosts)
