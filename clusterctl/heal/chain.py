"""Which steps of the escalation chain a quarantined host gets, from what it was quarantined for and the
findings that count against it now.

The steps, in the order they escalate: ``restart-app`` (the drain restarted the application's
pods elsewhere: check again), ``reset-gpu`` (``nvidia-smi -r -i N`` on the GPUs the findings
name, each only when no process uses it), ``reboot`` (over SSH), ``power-cycle`` (through the
BMC). After the last one comes "needs hardware". Each code the host was quarantined with and each
finding that counts against it picks a chain, first match wins: the inventory's
``quarantine.heal.chains`` for its code; else the first step (``FIRST_STEP``) of its action: an
alert's (bootstrap's DCGM rules), a finding's own (``evidence.action``); none matches: the default.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from clusterctl.findings import Finding
from clusterctl.inventory.model import HEAL_STEPS

#: Seconds each step may take, the host back (SSH answers, kubelet Ready) included.
DEFAULT_TIMEOUTS: dict[str, float] = {"restart-app": 60.0, "reset-gpu": 180.0, "reboot": 600.0,
                                      "power-cycle": 900.0}

#: A GPU off the bus (Xid 79, the driver's own line): NVIDIA says RESTART_BM, but a warm reboot keeps the slot
#: powered: it takes the power off (a cold boot) first.
OFF_THE_BUS = "GPU off the bus"
#: A finding's action (``health.xid_catalog.ACTIONS``: the Xid catalogue's and clusterctl's own) -> the first step
#: of its chain, which goes on from there in escalation order. None: no step cures it, hands do (a part to
#: replace, a card to reseat, its cooling, NVIDIA's support): straight to "needs hardware".
FIRST_STEP: dict[str, str | None] = {
    # Drain P2P: the drain stops the peer-to-peer traffic; then the checks again.
    **dict.fromkeys(("RESTART_APP", "DRAIN_P2P"), "restart-app"),
    **dict.fromkeys(("RESET_GPU", "WORKFLOW_XID_48", "WORKFLOW_NVLINK_ERR", "WORKFLOW_NVLINK5_ERR", "XID_154"),
                    "reset-gpu"),
    **dict.fromkeys(("RESTART_BM", "RESTART_VM"), "reboot"),
    OFF_THE_BUS: "power-cycle",
    **dict.fromkeys(("RMA", "CHECK_MECHANICALS", "CHECK_COOLING", "CONTACT_SUPPORT"), None),
}

#: Bootstrap's DCGM alert rules (the codes ``remediate serve`` quarantines with) -> their fault's action.
ALERT_ACTIONS: dict[str, str] = {"GPUFellOffTheBus": OFF_THE_BUS, "GPUDoubleBitECCErrors": "WORKFLOW_XID_48",
                                 "GPURowRemapFailure": "RMA", "NVLinkBandwidthZero": "WORKFLOW_NVLINK_ERR",
                                 "NVLinkCRCErrors": "WORKFLOW_NVLINK_ERR"}
DEFAULT_CHAIN: tuple[str, ...] = ("reboot", "power-cycle")
#: Each action's chain: its first step and every step after it.
_CHAINS = {action: HEAL_STEPS[HEAL_STEPS.index(first):] if first else () for action, first in FIRST_STEP.items()}


def action_of(finding: Finding) -> str:
    """The action that picks ``finding``'s chain: its own (``evidence.action``); a GPU off the bus's."""
    if finding.code == "GPU_FELL_OFF_BUS" or str(finding.evidence.get("xid")) == "79":
        return OFF_THE_BUS
    return str(finding.evidence.get("action") or "")


def chain_for(codes: Iterable[str], findings: Iterable[Finding] = (),
              overrides: Mapping[str, tuple[str, ...]] | None = None) -> tuple[tuple[str, ...], str]:
    """The steps for a host quarantined for ``codes`` whose findings that count against it are ``findings``,
    and where they come from (said in the plan). One that needs hands ends the chain before it starts: the
    release gate passes only once every one is cured. Else the union of their steps, in escalation order."""
    overrides = overrides or {}
    tries = [*((code, ALERT_ACTIONS.get(code, ""), "the alert's chain") for code in codes),
             *((f.code, action_of(f), "") for f in findings)]
    chosen = [(overrides[code], f"{code}: the inventory's quarantine.heal.chains") if code in overrides
              else (_CHAINS[action], f"{code}: {why or action}")
              for code, action, why in tries if code in overrides or action in _CHAINS]
    if not chosen:
        return DEFAULT_CHAIN, "no chain for these codes: the default"
    hands = [why for chain, why in chosen if not chain]
    steps = {step for chain, _ in chosen for step in chain} if not hands else set()
    return tuple(s for s in HEAL_STEPS if s in steps), "; ".join(dict.fromkeys(hands or [w for _, w in chosen]))
