"""Which hosts a health run or an alert takes out of service, and never too many at once.

The policy (inventory section ``quarantine:``, ``QuarantineConfig``):

* an **unhealthy** host (an error-level finding) is quarantined for its error codes; a
  **degraded** or unknown one is only reported. ``quarantine_codes`` narrows that to a list;
  ``ignore_codes`` never quarantine;
* it is also **drained** when one of those findings needs the host down: by default a finding
  whose action (``evidence.action``) takes the host down (``xid_catalog.takes_host_down``, the rule
  its severity and fix follow too); ``drain_codes`` names the codes instead;
* never more than ``max_unavailable`` hosts out of service at once (default 10% of the fleet,
  at least one): hosts quarantined already count, the rest wait, named, for the next run. So
  a broken check or a storm of alerts cannot empty the cluster.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Protocol

from clusterctl.findings import Finding, Severity
from clusterctl.health.xid_catalog import takes_host_down
from clusterctl.inventory.cluster_sections import by_rule
from clusterctl.inventory.model import QuarantineConfig
from clusterctl.inventory.quarantine_section import max_unavailable as max_unavailable_value

DEFAULT_MAX_UNAVAILABLE = "10%"


class HostVerdict(Protocol):
    """What the policy reads of a host's health (``clusterctl.health.model.HostHealth`` has it)."""

    @property
    def host(self) -> str: ...
    @property
    def reason(self) -> str: ...
    @property
    def findings(self) -> tuple[Finding, ...]: ...


class Action(str, Enum):
    """What the one decision says for a host (``decide``); the values are what JSON and logs show."""

    #: Out of service before this decision (quarantined, or cordoned by anyone): not acted on again.
    ALREADY_OUT = "already"
    #: Would be acted on, but ``max_unavailable`` hosts are out already: left in service, named.
    HELD = "held"
    #: Acted on: quarantined and drained.
    DRAIN = "drain"
    #: Acted on: quarantined (tainted, cordoned), not drained.
    QUARANTINE = "quarantine"
    #: Nothing asks for action: only reported.
    REPORT = "report"


@dataclass(frozen=True)
class Wanted:
    """What one source (a health run's findings, an alert) asks for one host."""

    host: str
    #: True: quarantine and drain; False: quarantine only; None: only report.
    drain: bool | None
    codes: tuple[str, ...] = ()
    reason: str = ""


@dataclass(frozen=True)
class Decision:
    host: str
    action: Action
    codes: tuple[str, ...]
    reason: str

    def to_json(self) -> dict[str, object]:
        return {"host": self.host, "action": self.action.value, "codes": list(self.codes), "reason": self.reason}


def decide(wanted: Sequence[Wanted], *, out_of_service: Iterable[str], limit: int) -> list[Decision]:
    """THE quarantine decision, for ``health --quarantine`` and ``remediate serve`` alike: one per host
    of ``wanted``, in its order, the cap (``limit`` hosts out of service at once, those in
    ``out_of_service`` counted) applied in that order. A host asked twice is decided once, on the
    stronger ask (drain over quarantine over report), its codes and reasons joined."""
    merged: dict[str, Wanted] = {}
    strength = {None: 0, False: 1, True: 2}
    for ask in wanted:
        before = merged.get(ask.host, Wanted(ask.host, None))
        reason = "; ".join(dict.fromkeys(r for r in (before.reason, ask.reason) if r))
        merged[ask.host] = Wanted(ask.host, max(before.drain, ask.drain, key=strength.__getitem__),
                                  tuple(dict.fromkeys(before.codes + ask.codes)), reason)
    out = set(out_of_service)
    decisions: list[Decision] = []
    for ask in merged.values():
        if ask.host in out:
            decisions.append(Decision(ask.host, Action.ALREADY_OUT, ask.codes, "out of service already"))
        elif ask.drain is None:
            decisions.append(Decision(ask.host, Action.REPORT, ask.codes, ask.reason))
        elif len(out) >= limit:
            decisions.append(Decision(ask.host, Action.HELD, ask.codes,
                                      f"{len(out)} host(s) out of service already, the most --max-unavailable "
                                      f"allows ({limit}): not quarantined; {ask.reason}"))
        else:
            out.add(ask.host)
            decisions.append(Decision(ask.host, Action.DRAIN if ask.drain else Action.QUARANTINE, ask.codes,
                                      ask.reason))
    return decisions


def cap(max_unavailable: str | None, fleet_size: int) -> int:
    """How many hosts may be out of service at once: ``3`` or ``10%`` of the fleet; at least one. What the
    option takes is what the inventory's ``quarantine.max_unavailable`` takes (a whole percentage)."""
    text = by_rule(max_unavailable_value, max_unavailable or DEFAULT_MAX_UNAVAILABLE, "--max-unavailable")
    number = int(text.rstrip("%"))
    return max(1, fleet_size * number // 100) if text.endswith("%") else number


def counts_against(finding: Finding, config: QuarantineConfig) -> bool:
    """Whether ``finding`` counts against its host: an error whose code ``ignore_codes`` does not name. The one
    test of what takes a host out (``health_wanted``) and keeps it out (``release``'s gate, heal's)."""
    return finding.severity is Severity.ERROR and finding.code not in config.ignore_codes


def needs_drain(finding: Finding, config: QuarantineConfig) -> bool:
    return finding.code in config.drain_codes if config.drain_codes is not None \
        else takes_host_down(finding.evidence.get("action"))


def health_wanted(verdicts: Sequence[HostVerdict], config: QuarantineConfig) -> list[Wanted]:
    """What a health run asks per host: its error findings the policy quarantines for, drained when one
    needs the host down; a host with none only reported."""
    wanted = []
    for verdict in verdicts:
        chosen = [f for f in verdict.findings if counts_against(f, config)
                  and (config.quarantine_codes is None or f.code in config.quarantine_codes)]
        codes = tuple(dict.fromkeys(f.code for f in chosen))
        drain = any(needs_drain(f, config) for f in chosen) if chosen else None
        wanted.append(Wanted(verdict.host, drain, codes, verdict.reason))
    return wanted
