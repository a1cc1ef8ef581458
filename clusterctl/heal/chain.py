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
from typing import Any

from clusterctl.inventory.model import HEAL_STEPS

#: Seconds each step may take, the host back (SSH answers, kubelet Ready) included.
DEFAULT_TIMEOUTS: dict[str, float] = {"restart-app": 60.0, "reset-gpu": 180.0, "reboot": 600.0,
                                      "power-cycle": 900.0}

_RESET_FIRST = ("reset-gpu", "reboot", "power-cycle")
#: The Xid catalogue's immediate actions (``clusterctl.health.xid_catalog.ACTIONS``) -> the chain.
ACTION_CHAINS: dict[str, tuple[str, ...]] = {
    "RESTART_APP": ("restart-app", *_RESET_FIRST),
    **dict.fromkeys(("RESET_GPU", "WORKFLOW_XID_48", "WORKFLOW_NVLINK_ERR", "WORKFLOW_NVLINK5_ERR", "XID_154"),
                    _RESET_FIRST),
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
    found = [_first_match((overrides, code, f"{code}: the inventory's quarantine.heal.chains"),
                          (ALERT_CHAINS, code, f"{code}: the alert's chain")) for code in codes]
    if not any(found):
        found = [_first_match((XID_CHAINS, xid, f"Xid {xid}: clusterctl's chain for it"),
                              (ACTION_CHAINS, action, f"Xid {xid}: the Xid catalogue's action {action}"))
                 for xid, action in xids]
    chosen = [match for match in found if match is not None]
    if not chosen:
        return DEFAULT_CHAIN, "no chain for these codes: the default"
    steps = {step for chain, _ in chosen for step in chain}
    return tuple(s for s in HEAL_STEPS if s in steps), "; ".join(dict.fromkeys(why for _, why in chosen))


def _first_match(*tries: tuple[Mapping[Any, tuple[str, ...]], object, str]) -> tuple[tuple[str, ...], str] | None:
    """The chain of the first (table, key, why) whose table holds the key, with its why; None: no table does."""
    return next(((table[key], why) for table, key, why in tries if key in table), None)
