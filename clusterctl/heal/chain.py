"""Which steps of the escalation chain a quarantined host gets, from its finding codes.

The steps, in the order they escalate: ``restart-app`` (the drain restarted the application's
pods elsewhere: check again), ``reset-gpu`` (``nvidia-smi -r -i N`` on the GPUs the findings
name, each only when no process uses it), ``reboot`` (over SSH), ``power-cycle`` (through the
BMC). After the last one comes "needs hardware". A code's chain is, first match wins: the
inventory's ``quarantine.heal.chains``; the chain of its alert (bootstrap's DCGM rules);
the chain of the Xid catalogue's immediate action of the Xids the findings carry; the default.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from clusterctl.inventory.model import HEAL_STEPS

#: Seconds each step may take, the host back (SSH answers, kubelet Ready) included.
DEFAULT_TIMEOUTS: dict[str, float] = {"restart-app": 60.0, "reset-gpu": 180.0, "reboot": 600.0,
                                      "power-cycle": 900.0}

#: The Xid catalogue's immediate actions (``clusterctl.health.xid_catalog.ACTIONS``) -> the chain.
ACTION_CHAINS: dict[str, tuple[str, ...]] = {
    "RESTART_APP": ("restart-app", "reset-gpu", "reboot", "power-cycle"),
    "RESET_GPU": ("reset-gpu", "reboot", "power-cycle"),
    "WORKFLOW_XID_48": ("reset-gpu", "reboot", "power-cycle"),
    "WORKFLOW_NVLINK_ERR": ("reset-gpu", "reboot", "power-cycle"),
    "WORKFLOW_NVLINK5_ERR": ("reset-gpu", "reboot", "power-cycle"),
    "XID_154": ("reset-gpu", "reboot", "power-cycle"),
    "RESTART_BM": ("reboot", "power-cycle"),
    "RESTART_VM": ("reboot",),
    # NVIDIA's own word is a person: straight to "needs hardware".
    "CONTACT_SUPPORT": (),
    "CHECK_MECHANICALS": (),
}

#: Xids whose chain differs from their action's: a GPU that fell off the bus (79) is not brought back by a
#: warm reboot, which keeps the slot powered; it takes the power off (a cold boot) first.
XID_CHAINS: dict[int, tuple[str, ...]] = {79: ("power-cycle",)}

#: Bootstrap's DCGM alert rules -> the chain (the alert names are the codes ``remediate serve`` quarantines with).
ALERT_CHAINS: dict[str, tuple[str, ...]] = {
    "GPUFellOffTheBus": XID_CHAINS[79],
    "GPUDoubleBitECCErrors": ACTION_CHAINS["WORKFLOW_XID_48"],
    "GPURowRemapFailure": (),
    "NVLinkBandwidthZero": ACTION_CHAINS["WORKFLOW_NVLINK_ERR"],
    "NVLinkCRCErrors": ACTION_CHAINS["WORKFLOW_NVLINK_ERR"],
}
DEFAULT_CHAIN: tuple[str, ...] = ("reboot", "power-cycle")


def chain_for(codes: Iterable[str], *, xids: Iterable[tuple[int, str]] = (),
              overrides: Mapping[str, tuple[str, ...]] | None = None) -> tuple[tuple[str, ...], str]:
    """The steps for a host quarantined for ``codes`` whose findings carry ``xids`` ((xid, action) pairs),
    and where they come from (said in the plan). Several codes: the union, in escalation order."""
    overrides = overrides or {}
    chosen: list[tuple[str, ...]] = []
    why: list[str] = []
    for code in codes:
        if code in overrides:
            chosen.append(overrides[code])
            why.append(f"{code}: the inventory's quarantine.heal.chains")
        elif code in ALERT_CHAINS:
            chosen.append(ALERT_CHAINS[code])
            why.append(f"{code}: the alert's chain")
    if not chosen:
        for xid, action in xids:
            if xid in XID_CHAINS:
                chosen.append(XID_CHAINS[xid])
                why.append(f"Xid {xid}: clusterctl's chain for it")
            elif action in ACTION_CHAINS:
                chosen.append(ACTION_CHAINS[action])
                why.append(f"Xid {xid}: the Xid catalogue's action {action}")
    if not chosen:
        return DEFAULT_CHAIN, "no chain for these codes: the default"
    steps = {step for chain in chosen for step in chain}
    return tuple(s for s in HEAL_STEPS if s in steps), "; ".join(dict.fromkeys(why))
