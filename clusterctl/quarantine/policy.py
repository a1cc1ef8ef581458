"""Which hosts a health run or an alert takes out of service, and never too many at once.

The policy (inventory section ``quarantine:``, ``QuarantineConfig``):

* an **unhealthy** host (an error-level finding) is quarantined for its error codes; a
  **degraded** or unknown one is only reported. ``quarantine_codes`` narrows that to a list;
  ``ignore_codes`` never quarantine;
* it is also **drained** when one of those findings needs the host down: by default a finding
  whose Xid-catalogue action (``evidence.action``) is one that takes a reset, a reboot or a
  repair (``DRAIN_ACTIONS``); ``drain_codes`` names the codes instead;
* never more than ``max_unavailable`` hosts out of service at once (default 10% of the fleet,
  at least one): hosts quarantined already count, the rest wait, named, for the next run. So
  a broken check or a storm of alerts cannot empty the cluster.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

from clusterctl.errors import UsageError
from clusterctl.findings import Finding, Severity
from clusterctl.inventory.model import QuarantineConfig

#: Xid-catalogue actions (and health's own) after which the host must go down: reset, reboot, repair.
DRAIN_ACTIONS = frozenset({"RESET_GPU", "RESTART_BM", "RESTART_VM", "RMA", "CONTACT_SUPPORT", "CHECK_MECHANICALS",
                           "WORKFLOW_XID_48", "WORKFLOW_NVLINK_ERR", "WORKFLOW_NVLINK5_ERR", "XID_154"})
DEFAULT_MAX_UNAVAILABLE = "10%"


class HostVerdict(Protocol):
    """What the policy reads of a host's health (``clusterctl.health.model.HostHealth`` has it)."""

    @property
    def host(self) -> str: ...
    @property
    def reason(self) -> str: ...
    @property
    def findings(self) -> tuple[Finding, ...]: ...


@dataclass(frozen=True)
class Decision:
    host: str
    #: ``drain`` (quarantine and drain), ``quarantine``, ``report`` (nothing done), ``held`` (would
    #: be quarantined, but the cap is reached), ``already`` (quarantined before this run).
    action: str
    codes: tuple[str, ...]
    reason: str

    @property
    def acts(self) -> bool:
        return self.action in ("drain", "quarantine")

    def to_json(self) -> dict[str, object]:
        return {"host": self.host, "action": self.action, "codes": list(self.codes), "reason": self.reason}


def cap(max_unavailable: str | None, fleet_size: int) -> int:
    """How many hosts may be out of service at once: ``3`` or ``10%`` of the fleet; at least one."""
    text = (max_unavailable or DEFAULT_MAX_UNAVAILABLE).strip()
    try:
        if text.endswith("%"):
            share = float(text[:-1])
            if not 0 < share <= 100:
                raise ValueError(text)
            return max(1, math.floor(fleet_size * share / 100))
        count = int(text)
    except ValueError:
        raise UsageError(f"--max-unavailable takes a host count or a percentage such as 10%, got {text!r}",
                         field="--max-unavailable") from None
    if count < 1:
        raise UsageError(f"--max-unavailable must be at least 1, got {count}", field="--max-unavailable")
    return count


def _quarantining(findings: Iterable[Finding], config: QuarantineConfig) -> list[Finding]:
    chosen = []
    for finding in findings:
        if finding.severity is not Severity.ERROR or finding.code in config.ignore_codes:
            continue
        if config.quarantine_codes is not None and finding.code not in config.quarantine_codes:
            continue
        chosen.append(finding)
    return chosen


def needs_drain(finding: Finding, config: QuarantineConfig) -> bool:
    if config.drain_codes is not None:
        return finding.code in config.drain_codes
    return str(finding.evidence.get("action", "")) in DRAIN_ACTIONS


def decide(verdicts: Sequence[HostVerdict], config: QuarantineConfig, *, fleet_size: int,
           already: Iterable[str] = (), max_unavailable: str | None = None) -> list[Decision]:
    """One decision per host of ``verdicts``, in their order, the cap applied in that order."""
    out_of_service = set(already)
    limit = cap(max_unavailable or config.max_unavailable, fleet_size)
    decisions: list[Decision] = []
    for verdict in verdicts:
        chosen = _quarantining(verdict.findings, config)
        codes = tuple(dict.fromkeys(f.code for f in chosen))
        if verdict.host in out_of_service:
            decisions.append(Decision(verdict.host, "already", codes, "quarantined before this run"))
            continue
        if not chosen:
            decisions.append(Decision(verdict.host, "report", codes, verdict.reason))
            continue
        if len(out_of_service) >= limit:
            decisions.append(Decision(verdict.host, "held", codes,
                                      f"{len(out_of_service)} host(s) out of service already, the most "
                                      f"--max-unavailable allows ({limit}): not quarantined; {verdict.reason}"))
            continue
        out_of_service.add(verdict.host)
        action = "drain" if any(needs_drain(f, config) for f in chosen) else "quarantine"
        decisions.append(Decision(verdict.host, action, codes, verdict.reason))
    return decisions
