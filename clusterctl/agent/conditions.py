"""Findings -> NodeConditions, node-problem-detector's way: ``True`` while the problem is present.

Every run writes every type below, so a condition whose finding is gone turns ``False`` (cleared)
on the next run, and a condition is only ever set by the agent that owns it. A condition is
``True`` for error-level findings (what ``clusterctl health`` calls unhealthy: take the host out
of service); warnings go to the metrics only. ``lastTransitionTime`` moves only when the status
changes; ``lastHeartbeatTime`` is every run's.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from clusterctl.findings import Finding, Severity, sorted_findings
from clusterctl.wording import more_codes


@dataclass(frozen=True)
class ConditionType:
    type: str
    #: Reason while no finding of this kind is there (``False``).
    clear_reason: str
    #: The finding codes it takes, by prefix or by name (GPU takes every code no other type does).
    prefixes: tuple[str, ...] = ()
    codes: tuple[str, ...] = ()


#: GPUs: ECC, row remapping, Xids, fallen off the bus, temperature, fabric, missing GPUs, DCGM diagnostics.
GPU = ConditionType("GPUProblem", "GPUsHealthy")
#: NVLinks down or erroring, NVSwitch SXids.
NVLINK = ConditionType("NVLinkProblem", "NVLinksHealthy", ("NVLINK_", "NVSWITCH_"))
#: InfiniBand/RoCE ports down, slow, flapping or erroring.
INFINIBAND = ConditionType("InfiniBandProblem", "InfiniBandHealthy", ("IB_",))
#: PCIe links trained below their width or speed, ACS between GPUs and NICs.
PCIE = ConditionType("PCIeProblem", "PCIeHealthy", ("PCIE_",))
#: A probe that hung or failed: the agent could not check part of the host (a hung nvidia-smi is the classic
#: sign of a GPU off the bus).
CHECKS = ConditionType("HealthCheckProblem", "HealthChecksRan", codes=(
    "PROBE_HUNG", "PROBE_FAILED", "TOOL_MISSING", "KERNEL_LOG_UNREADABLE", "HOST_UNREACHABLE"))
#: Every type the agent owns, in the order it writes them.
TYPES: tuple[ConditionType, ...] = (GPU, NVLINK, INFINIBAND, PCIE, CHECKS)
#: Longest message written (the API server takes more; ``kubectl describe node`` should stay readable).
MESSAGE_LIMIT = 1024
_ACRONYMS = {"GPU": "GPU", "NVLINK": "NVLink", "IB": "IB", "PCIE": "PCIe", "ECC": "ECC", "XID": "Xid",
             "SXID": "SXid", "DCGM": "DCGM", "NVSWITCH": "NVSwitch", "ACS": "ACS", "MIG": "MIG"}


def condition_type(code: str) -> ConditionType:
    """Which condition a finding code belongs to."""
    return next((kind for kind in TYPES if code.startswith(kind.prefixes) or code in kind.codes), GPU)


def reason_of(code: str) -> str:
    """``GPU_ROW_REMAP_PENDING`` -> ``GPURowRemapPending``: a NodeCondition reason is one CamelCase word."""
    return "".join(_ACRONYMS.get(word, word.capitalize()) for word in code.split("_") if word)


def _message(found: Sequence[Finding]) -> str:
    first = found[0]
    subject = f"{first.subject}: " if first.subject else ""
    text = f"clusterctl: {first.code}: {subject}{first.message}{more_codes([f.code for f in found[1:]])}"
    return text if len(text) <= MESSAGE_LIMIT else text[: MESSAGE_LIMIT - 3] + "..."


def conditions(findings: Iterable[Finding], now: str,
               current: Sequence[Mapping[str, Any]] = ()) -> list[dict[str, str]]:
    """The agent's conditions for this run, ``current`` being the Node's conditions as read.

    ``now``: RFC 3339 UTC (``2026-12-06T02:10:00Z``).
    """
    errors = [f for f in sorted_findings(list(findings)) if f.severity is Severity.ERROR]
    before = {str(c.get("type")): c for c in current if isinstance(c, Mapping)}
    out = []
    for kind in TYPES:
        mine = [f for f in errors if condition_type(f.code) is kind]
        status = "True" if mine else "False"
        reason = reason_of(mine[0].code) if mine else kind.clear_reason
        message = _message(mine) if mine else f"clusterctl: no {kind.type[: -len('Problem')]} problem found"
        old = before.get(kind.type)
        since = str(old.get("lastTransitionTime")) if old and old.get("status") == status and \
            old.get("lastTransitionTime") else now
        out.append({"type": kind.type, "status": status, "reason": reason, "message": message,
                    "lastHeartbeatTime": now, "lastTransitionTime": since})
    return out
