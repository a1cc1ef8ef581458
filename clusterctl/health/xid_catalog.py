"""NVIDIA's published Xid catalogue: what each Xid means and the action NVIDIA gives for it.

``data/xid_catalog.csv`` holds the catalogue's rows (Ampere and newer: A100, H100, B100,
GB200) except those NVIDIA marks "Unused": the Xid, its mnemonic, description, and the two
resolution buckets ("Immediate Action", "Investigatory Action"). ``CATALOG_SOURCE`` and
``CATALOG_VERSION`` say which publication the rows are from; every health finding about an Xid
carries both, so a report says which catalogue judged it.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from functools import cache
from importlib import resources

from clusterctl.findings import Severity

CATALOG_SOURCE = "https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html"
#: The catalogue as published on 2025-10-29 (the copy these rows were taken from; Xids 1-172).
CATALOG_VERSION = "2025-10-29"


@dataclass(frozen=True)
class XidEntry:
    xid: int
    mnemonic: str
    description: str
    #: NVIDIA's "Resolution Bucket (Immediate Action)": RESTART_APP, RESET_GPU, RESTART_BM, IGNORE...
    immediate_action: str
    investigatory_action: str


#: The actions that take the host down (``takes_host_down``) and what follows the drain their fix opens with: the
#: catalogue's and clusterctl's own (nvidia-smi's GPU Recovery Action ``DRAIN_P2P``, ``RMA``, ``CHECK_COOLING``).
HOST_DOWN: dict[str, str] = {
    "RESET_GPU": "reset the GPU (nvidia-smi -r -i <gpu>) or reboot (NVIDIA: RESET_GPU).",
    "RESTART_BM": "reboot it (NVIDIA: RESTART_BM); if it comes back, open an RMA.",
    "RESTART_VM": "restart the VM (NVIDIA: RESTART_VM).",
    "CONTACT_SUPPORT": "contact NVIDIA support / open an RMA (NVIDIA: CONTACT_SUPPORT).",
    "CHECK_MECHANICALS": "check the GPU's auxiliary power cabling (NVIDIA: CHECK_MECHANICALS).",
    "WORKFLOW_XID_48": "reset the GPU so the row of the double-bit ECC error is remapped; RMA if it repeats "
                       "(NVIDIA: WORKFLOW_XID_48).",
    "WORKFLOW_NVLINK_ERR": "reset the GPUs and check the NVLink counters (nvidia-smi nvlink -e); RMA if it "
                           "repeats (NVIDIA: WORKFLOW_NVLINK_ERR).",
    "WORKFLOW_NVLINK5_ERR": "follow NVIDIA's NVLink5 workflow (reset, then fabric manager and link checks) "
                            "(NVIDIA: WORKFLOW_NVLINK5_ERR).",
    "XID_154": "do what the driver's message asks (reset or reboot) (NVIDIA: XID_154).",
    "DRAIN_P2P": "check again once no process uses peer-to-peer traffic on the GPU and UVM persistence mode is "
                 "off: the driver then names the action that follows (NVIDIA: Drain P2P).",
    "RMA": "open an RMA for the GPU.",
    "CHECK_COOLING": "check its cooling now.",
}
#: What each immediate-action bucket asks of an operator, and how bad it is for the host: an action that takes
#: the host down is an error whose fix opens with the drain.
ACTIONS: dict[str, tuple[Severity, str]] = {
    "IGNORE": (Severity.INFO, "No action needed for this Xid alone (NVIDIA: IGNORE); watch for it repeating."),
    "RESTART_APP": (Severity.WARNING, "Restart the application that hit it (NVIDIA: RESTART_APP); if it repeats "
                                      "on the same GPU, drain the host and run 'clusterctl health --level 2'."),
    "UPDATE_SWFW": (Severity.WARNING, "Update the driver / firmware (NVIDIA: UPDATE_SWFW)."),
    "CHECK_UVM": (Severity.WARNING, "Check the application's unified-memory use (NVIDIA: CHECK_UVM)."),
    "WORKFLOW_XID_45": (Severity.INFO, "Follows another Xid: act on that one (NVIDIA: WORKFLOW_XID_45)."),
    **{action: (Severity.ERROR, f"Drain the host, then {then}") for action, then in HOST_DOWN.items()},
}
_UNKNOWN = (Severity.WARNING, "Not in NVIDIA's Xid catalogue: look the Xid up in the driver's release notes.")


@cache
def catalog() -> dict[int, XidEntry]:
    text = resources.files("clusterctl.health").joinpath("data/xid_catalog.csv").read_text(encoding="utf-8")
    return {int(r["xid"]): XidEntry(int(r["xid"]), r["mnemonic"], r["description"], r["immediate_action"],
                                    r["investigatory_action"]) for r in csv.DictReader(text.splitlines())}


def takes_host_down(action: object) -> bool:
    """THE rule of what a finding's action (its ``evidence.action``) makes the machinery do: an action of
    ``HOST_DOWN`` (a reset, a reboot, a repair, a drain) takes the host down: its finding is an error, its fix
    opens with draining the host, and the quarantine policy drains for it. Any other action, or none, leaves
    the host's running work alone."""
    return str(action) in HOST_DOWN


def judge(xid: int) -> tuple[Severity, str, str]:
    """(severity, what to do, NVIDIA's bucket) for one Xid."""
    entry = catalog().get(xid)
    # Buckets NVIDIA left empty (newest Xids) fall back on the investigatory bucket.
    bucket = (entry.immediate_action or entry.investigatory_action) if entry else ""
    return (*ACTIONS.get(bucket, _UNKNOWN), bucket or "UNKNOWN")
