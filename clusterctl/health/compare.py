"""``health compare A B``: what got worse between two saved health runs, host by host.

Worse means: the verdict got worse; a finding code appeared on a host; a counter grew (ECC,
remapped rows, retired pages, PCIe replays, NVLink and InfiniBand error counters); an Xid or
SXid was seen more often; an NVLink or an InfiniBand port that was up went down. Each change is
a ``Finding`` (codes ``HEALTH_*``) so it prints and exits the one way every command does, with the
action (``evidence.action``) that a host's own finding of the same fault carries.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from clusterctl.findings import Finding, Severity, sorted_findings
from clusterctl.health import xid_catalog
from clusterctl.health.model import HealthReport, HostHealth

_GPU_COUNTERS = ("ecc_volatile_uncorrectable", "ecc_aggregate_uncorrectable", "ecc_volatile_correctable",
                 "ecc_aggregate_correctable", "remapped_rows_uncorrectable", "remapped_rows_correctable",
                 "retired_pages_sbe", "retired_pages_dbe", "pcie_replays")
_SERIOUS = {"ecc_volatile_uncorrectable", "ecc_aggregate_uncorrectable", "remapped_rows_uncorrectable",
            "retired_pages_dbe"}


def _grew(before: Any, after: Any) -> bool:
    return isinstance(after, int) and after > (before if isinstance(before, int) else 0)


def _counter_changes(host: str, kind: str, before: Mapping[str, Any], after: Mapping[str, Any]) -> Iterator[Finding]:
    for key, counters in after.items():
        old = before.get(key) or {}
        grown = {name: (old.get(name, 0), value) for name, value in (counters or {}).items()
                 if _grew(old.get(name), value)}
        if grown:
            yield Finding(
                Severity.WARNING, f"HEALTH_{kind}_COUNTERS_GREW",
                ", ".join(f"{n} {a} -> {b}" for n, (a, b) in grown.items()),
                host=host, subject=key, evidence={name: {"before": a, "after": b} for name, (a, b) in grown.items()},
                fix="A counter that keeps growing is a link going bad: reseat or replace the cable / transceiver "
                    "(InfiniBand) or reset the GPUs and RMA if it persists (NVLink).")


def compare_hosts(before: HostHealth, after: HostHealth) -> Iterator[Finding]:
    name = after.host
    if after.verdict.rank > before.verdict.rank:
        yield Finding(Severity.ERROR if after.verdict.value == "unhealthy" else Severity.WARNING,
                      "HEALTH_VERDICT_WORSE", f"{before.verdict.value} -> {after.verdict.value}: {after.reason}",
                      host=name, evidence={"before": before.verdict.value, "after": after.verdict.value})
    old_codes = {(f.code, f.subject) for f in before.findings}
    for f in after.findings:
        if (f.code, f.subject) not in old_codes and f.severity is not Severity.INFO and f.code != "GPU_XID":
            carried = {"action": f.evidence["action"]} if f.evidence.get("action") else {}
            yield Finding(f.severity, "HEALTH_NEW_FINDING", f"new: {f.code}: {f.message}", host=name,
                          subject=f.subject, fix=f.fix, evidence={"code": f.code, **carried})
    b, a = before.facts, after.facts
    for bus, gpu in (a.get("gpus") or {}).items():
        old = (b.get("gpus") or {}).get(bus) or {}
        grown = {c: (old.get(c) or 0, gpu.get(c)) for c in _GPU_COUNTERS if _grew(old.get(c), gpu.get(c))}
        if grown:
            serious = any(c in _SERIOUS for c in grown)
            yield Finding(
                Severity.ERROR if serious else Severity.WARNING, "HEALTH_GPU_COUNTERS_GREW",
                ", ".join(f"{c} {x} -> {y}" for c, (x, y) in grown.items()), host=name,
                subject=f"GPU {gpu.get('index')} ({bus})",
                evidence={**{c: {"before": x, "after": y} for c, (x, y) in grown.items()},
                          **({"action": "RESET_GPU"} if serious else {})},
                fix="Uncorrectable errors or remapped rows that grow: drain the host and reset the GPU; RMA if it "
                    "goes on." if serious else "Watch it at the next run.")
        if gpu.get("remap_failure") and not old.get("remap_failure"):
            yield Finding(Severity.ERROR, "HEALTH_GPU_REMAP_FAILED", "row remapping failed since the last run",
                          host=name, subject=f"GPU {gpu.get('index')} ({bus})", evidence={"action": "RMA"},
                          fix="Drain the host; RMA the GPU.")
    for bus in set(b.get("gpus") or {}) - set(a.get("gpus") or {}):
        if a.get("gpus") is not None:
            yield Finding(Severity.ERROR, "HEALTH_GPU_GONE", f"GPU {bus} was listed before and is gone now",
                          host=name, subject=bus, evidence={"action": "RESTART_BM"},
                          fix="Drain the host and reboot it; look for Xid 79 in the kernel log.")
    for key, event in (a.get("kernel_events") or {}).items():
        old = (b.get("kernel_events") or {}).get(key) or {}
        if event.get("count", 0) > old.get("count", 0) or (old and event.get("last") != old.get("last")):
            label = f"{event.get('kind')} {event.get('code')}" if event.get("code") is not None else event.get("kind")
            # An Xid's action is the catalogue's, as on the host's own GPU_XID (which HEALTH_NEW_FINDING leaves out).
            xid = event.get("code") if event.get("kind") == "xid" else None
            _, fix, action = xid_catalog.judge(xid) if isinstance(xid, int) else (None, "", None)
            down = xid_catalog.takes_host_down(action)
            yield Finding(
                Severity.ERROR if down else Severity.WARNING, "HEALTH_NEW_KERNEL_EVENTS",
                f"{label} on {event.get('pci') or '?'}: {old.get('count', 0)} -> {event.get('count')} in the window",
                host=name, subject=str(event.get("pci") or ""), fix=fix,
                evidence={"last": event.get("last"), **({"action": action} if action else {})})
    for gpu, state in (a.get("nvlink") or {}).items():
        old = (b.get("nvlink") or {}).get(gpu) or {}
        went_down = sorted(set(state.get("inactive") or ()) - set(old.get("inactive") or ()))
        if old and went_down:
            yield Finding(Severity.ERROR, "HEALTH_NVLINK_WENT_DOWN",
                          f"NVLinks {', '.join(map(str, went_down))} went down", host=name,
                          subject=f"GPU {gpu}", evidence={"action": "RESET_GPU"},
                          fix="Drain the host and reset the GPUs; RMA if they stay down.")
    for port, state in (a.get("ib_ports") or {}).items():
        old_state = (b.get("ib_ports") or {}).get(port)
        if old_state == "PORT_ACTIVE" and state != "PORT_ACTIVE":
            yield Finding(Severity.ERROR, "HEALTH_IB_PORT_WENT_DOWN", f"{old_state} -> {state}", host=name,
                          subject=port, fix="Check the cable and the switch port.")
    yield from _counter_changes(name, "NVLINK", b.get("nvlink_errors") or {}, a.get("nvlink_errors") or {})
    yield from _counter_changes(name, "IB", b.get("ib_counters") or {}, a.get("ib_counters") or {})


def compare_reports(before: HealthReport, after: HealthReport) -> list[Finding]:
    found = [f for host in after.hosts if (old := before.host(host.host)) is not None for f in compare_hosts(old, host)]
    found += [Finding(Severity.INFO, "HEALTH_HOST_NOT_CHECKED", "in the first report only", host=host.host)
              for host in before.hosts if after.host(host.host) is None]
    return sorted_findings(found)
