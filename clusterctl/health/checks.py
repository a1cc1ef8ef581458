"""Judging one host's probes, alone and against its peers, into findings.

Thresholds are absolute where NVIDIA documents them (a pending row remap needs a GPU reset, a
remapping failure means RMA, the Xid catalogue's action per Xid, a GPU at its slowdown
temperature) and fleet-relative where it does not (error counters far above the median of the
same counter on peer hosts, a power cap or MIG mode unlike the majority's). Peers are hosts
with the same GPU model and count, as in survey (``survey.checks.host.majority``).
"""

from __future__ import annotations

import datetime
import statistics
from bisect import bisect_right
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property, partial
from itertools import accumulate
from typing import Any, TypeVar

from clusterctl.facts.health_model import GpuHealth, IBPortCounters, KernelEvent, NVLinkErrorCounters, PciDevice
from clusterctl.facts.lspci import pci_address
from clusterctl.facts.model import NVLinkStatus
from clusterctl.facts.rdma import card_of
from clusterctl.findings import Finding, Severity
from clusterctl.health import xid_catalog
from clusterctl.health.model import since_seconds
from clusterctl.health.probe import PROBE_HEAD_BYTES, PROBE_TAIL_BYTES, HostProbe
from clusterctl.inventory.model import Fabric
from clusterctl.survey.checks.host import (
    MadeOnce,
    active_lanes,
    card_ports,
    majority,
    narrow_pcie,
    port_key,
    slow_port,
    usual_gpu_count,
    usual_link_rates,
    usual_pcie_width,
    usually_active,
)
from clusterctl.wording import first_few

#: A counter is "far above the fleet" above this many times the peers' median ...
FLEET_FACTOR = 10
#: ... and never below these floors (a clean fleet's median is 0). Link recoveries and link-down
#: events are rare enough that one is worth a look: Blackwell (NVLink 5) counts them as link recovery events,
#: and its local link integrity errors count times the link's own local-error threshold was crossed
#: (NVIDIA/DCGM dcgmlib/dcgm_fields.h, DCGM_FI_DEV_NVLINK_COUNT_LINK_RECOVERY_* and _LOCAL_LINK_INTEGRITY_ERRORS).
NVLINK_FLOORS = {"Recovery Errors": 1, "Link recovery failed events": 1, "Link recovery successful events": 1,
                 "Total link recovery events": 1, "Local link integrity Errors": 1}
NVLINK_FLOOR = 100
#: An InfiniBand port's local link integrity errors, too, count LocalPhyErrors thresholds crossed (IBTA's
#: PortCounters; NVIDIA NVSentinel's nic-health-monitor defaults to fatal on any increment).
#: Excessive buffer overruns keep 100: UFM's default alarm threshold; gpud's real H100 reads 15 on every port.
IB_FLOORS = {"link_downed": 1, "link_error_recovery": 1, "local_link_integrity_errors": 1}
IB_FLOOR = 100
ECC_CORRECTABLE_FLOOR = 1000
#: Clock event reasons that mean the GPU is protecting itself (not a setting, not idle), as nvidia-smi orders them.
SLOWDOWN = ("HW Slowdown", "HW Thermal Slowdown", "HW Power Brake Slowdown", "SW Thermal Slowdown")


@dataclass
class HostInput:
    """One host as the judge sees it."""

    name: str
    probe: HostProbe | None
    failure: str | None = None
    #: The inventory's fabric: a port on it is held to its ``rate_gbps``, whatever its peers run at.
    fabric: Fabric = field(default_factory=Fabric)

    @property
    def gpus(self) -> tuple[GpuHealth, ...]:
        return self.probe.smi.gpus if self.probe and self.probe.smi else ()

    @cached_property
    def peer_key(self) -> tuple[str | None, int]:
        """The GPU model most of its GPUs are, and how many: hosts alike are judged against each other."""
        names = Counter(g.name for g in self.gpus if g.name)
        return (names.most_common(1)[0][0] if names else None, len(self.gpus))


@dataclass
class Baseline:
    """The fleet side of the comparisons, built once per run from every host that answered."""

    hosts: Sequence[HostInput]
    _groups: dict[tuple[str | None, int], list[HostInput]] = field(default_factory=dict)
    #: Fleet values made once per run, and what is made of one parsed output alike hosts share.
    kept: MadeOnce = field(default_factory=MadeOnce)

    def __post_init__(self) -> None:
        for h in self.hosts:
            if h.probe is not None:
                self._groups.setdefault(h.peer_key, []).append(h)

    def peers(self, host: HostInput) -> list[HostInput]:
        return self._groups.get(host.peer_key, [])

    def gpu_count(self, model: str | None) -> int | None:
        """The GPU count most GPU hosts (with nvidia-smi answers) of ``model`` have, as survey counts them."""
        return self.kept.get(("gpu-count", model), lambda: usual_gpu_count(
            (h.peer_key for h in self.hosts if h.gpus), model))

    def median(self, key: tuple[object, ...], peers: Callable[[], Sequence[Counted]], counter: str, *,
               own: Sequence[Counted]) -> float:
        """The median of ``counter`` over the counters ``peers`` gives (made once per run, under ``key``) less
        ``own``, the judged host's, which ``peers`` holds: a link is held to other hosts' links; 0 with none."""
        every = self.kept.get((*key, "peers"), peers)
        spread = self.kept.get((*key, "spread", counter), partial(_counter_spread, every, counter))
        return _median_without(spread, sorted(c.counters.get(counter, 0) for c in own))


def _finding(severity: Severity, code: str, host: str, message: str, *, subject: str | None = None,
             fix: str = "", evidence: str | None = None, **more: object) -> Finding:
    data: dict[str, object] = {k: v for k, v in more.items() if v is not None}
    if evidence:
        data["evidence"] = evidence
    return Finding(severity, code, message, host=host, subject=subject, fix=fix, evidence=data)


def gpu_index(subject: str | None, by_address: Mapping[str, int] | None = None) -> int | None:
    """The GPU index a finding's subject names (``GPU 3``: ``GPU`` and its ``nvsmi_id``), or that ``by_address``
    (``pci_address`` -> index) gives a GPU named by its bus id (``GPU 00000000:47:00.0``); None for another
    subject (a NIC, the host) or a bus id it does not hold."""
    named = (subject or "").removeprefix("GPU ")
    if named.isdigit():
        return int(named)
    return (by_address or {}).get(pci_address(named) or "") if named != subject else None


def nvsmi_id(gpu: GpuHealth) -> str:
    """What ``nvidia-smi -i`` takes for this GPU, and a finding names it by (``GPU 3``): its index, or its bus id
    where the output was a selection."""
    return str(gpu.index) if gpu.index_known else gpu.bus_id


def _recovery_fix(recovery: str | None, gpu_id: str) -> tuple[str, str]:
    """The immediate action and fix for nvidia-smi's GPU Recovery Action (None: a Reset Status flag), after
    NVIDIA's "Error Recovery and Response Flags": Reboot means the fault may have left the OS inconsistent (a GPU
    reset is not enough); Drain P2P asks to stop peer-to-peer traffic, then to read the action again."""
    said = (recovery or "").lower()
    if "reboot" in said:
        return "RESTART_BM", ("Drain the host and reboot it: the driver says the fault may have left the OS "
                              "inconsistent, so a GPU reset is not enough (NVIDIA: Reboot).")
    action = "DRAIN_P2P" if said == "drain p2p" else "RESET_GPU"
    return action, xid_catalog.ACTIONS[action][1].replace("<gpu>", gpu_id)


def _counter_spread(items: Sequence[NVLinkErrorCounters | IBPortCounters], name: str) -> tuple[list[int], list[int]]:
    """Counter ``name``'s values over ``items``, sorted and each once, and how many items are at or below each.

    Alike hosts share their parsed outputs, so a fleet's list of links holds the same few objects
    over and over (900 hosts x 96 links, a handful of objects): each is read once and counted as
    often as it appears."""
    by_id = {id(item): item for item in items}
    times: Counter[int] = Counter()
    for key, count in Counter(map(id, items)).items():
        times[by_id[key].counters.get(name, 0)] += count
    values = sorted(times)
    return values, list(accumulate(times[v] for v in values))


def _median_without(spread: tuple[list[int], list[int]], own: list[int]) -> float:
    """The median, as ``statistics.median`` gives it, of the ``spread`` less the sorted values ``own`` it holds."""
    values, at_or_below = spread
    left = (at_or_below[-1] if values else 0) - len(own)
    if left <= 0:
        return 0.0

    def at(index: int) -> int:  # the index-th smallest value left: the first with more than index left at or below
        return values[bisect_right(range(len(values)), index,
                                   key=lambda i: at_or_below[i] - bisect_right(own, values[i]))]
    middle = left // 2
    return at(middle) if left % 2 else (at(middle - 1) + at(middle)) / 2


# --- nvidia-smi -q ------------------------------------------------------------------------


def check_gpus(host: HostInput, baseline: Baseline) -> Iterator[Finding]:
    def usual_width() -> int | None:
        return baseline.kept.get(("pcie-width", host.peer_key), lambda: usual_pcie_width(
            g.pcie_width_current for p in baseline.peers(host) for g in p.gpus))

    for gpu in host.gpus:
        yield from _gpu_findings(host.name, gpu, usual_width)
    yield from _fleet_gpu(host, baseline)


#: ``add(severity, code, message, **more)``: a finding about one GPU, the message after its bus id and model.
AddFinding = Callable[..., None]


def _gpu_findings(name: str, gpu: GpuHealth, usual_width: Callable[[], int | None]) -> list[Finding]:
    """What ``nvidia-smi -q`` says of one GPU, judged alone."""
    found: list[Finding] = []
    where = f"{gpu.bus_id} {gpu.name or ''}".strip()

    def add(severity: Severity, code: str, message: str, **more: Any) -> None:
        found.append(_finding(severity, code, name, f"{where}: {message}", subject=f"GPU {nvsmi_id(gpu)}", **more))

    if gpu.remap_failure:
        add(Severity.ERROR, "GPU_ROW_REMAP_FAILURE", "row remapping failed (no spare rows left)",
            evidence="Remapping Failure Occurred : Yes", action="RMA",
            fix="Drain the host and open an RMA for this GPU: NVIDIA's memory error guide says a GPU with a "
                "row-remapping failure can no longer mask bad memory.")
    if gpu.unread:
        add(Severity.WARNING, "GPU_FACT_UNREAD", f"nvidia-smi printed {', '.join(gpu.unread)} with a value that could "
            "not be read: unknown, not taken as good", unread=list(gpu.unread),
            fix=f"Look at these values by hand (nvidia-smi -q -i {nvsmi_id(gpu)}); re-run the check on the host's "
                "own output rather than an edited paste.")
    if gpu.ecc_mode and gpu.ecc_mode not in ("Enabled", "Disabled"):
        add(Severity.WARNING, "GPU_ECC_MODE_UNKNOWN", f"ECC mode reads '{gpu.ecc_mode}' instead of Enabled/Disabled",
            evidence=f"ECC Mode / Current : {gpu.ecc_mode}",
            fix="nvidia-smi could not read the ECC mode: the GPU or its InfoROM may be failing. Check the kernel "
                "log for Xids, reset the GPU (or reboot) and look again; RMA if it stays unreadable.")
    if gpu.remap_pending:
        add(Severity.ERROR, "GPU_ROW_REMAP_PENDING", f"a row remap is pending ({gpu.remapped_rows_uncorrectable or 0} "
            f"uncorrectable, {gpu.remapped_rows_correctable or 0} correctable rows remapped)",
            evidence="Remapped Rows / Pending : Yes", action="RESET_GPU",
            fix=f"Drain the host, then reset the GPU (nvidia-smi -r -i {nvsmi_id(gpu)}) or reboot: the remap only "
                "takes effect after a reset (NVIDIA A100/H100 memory error management).")
    # 575+ drivers deprecate GPU Reset Status for GPU Recovery Action (Reset, Reboot, Drain P2P, ...).
    recovery = gpu.recovery_action if gpu.recovery_action not in (None, "None") else None
    flag = "Reset Required" if gpu.reset_required else (
        "Drain and Reset Recommended" if gpu.drain_and_reset_recommended else None)
    if flag or recovery:
        said = f"{flag}: Yes" if flag else f"GPU Recovery Action: {recovery}"
        action, fix = _recovery_fix(recovery, nvsmi_id(gpu))
        add(Severity.ERROR, "GPU_RESET_REQUIRED", f"nvidia-smi reports '{said}'", action=action,
            evidence=f"GPU Reset Status / {flag} : Yes" if flag else f"GPU Recovery Action : {recovery}", fix=fix)
    vol = gpu.ecc.volatile_uncorrectable
    if vol:
        add(Severity.ERROR, "GPU_ECC_UNCORRECTABLE", f"{vol} uncorrectable ECC error(s) since the last reset",
            evidence=f"ECC Errors / Volatile / Uncorrectable : {vol}", action="RESET_GPU", count=vol,
            fix="Drain the host and reset the GPU so the faulty memory is retired/remapped; RMA if uncorrectable "
                "errors come back after the reset.")
    elif gpu.ecc.aggregate_uncorrectable:
        add(Severity.INFO, "GPU_ECC_UNCORRECTABLE_HISTORY", f"{gpu.ecc.aggregate_uncorrectable} uncorrectable ECC "
            "error(s) over the GPU's lifetime (none since the last reset)", count=gpu.ecc.aggregate_uncorrectable)
    if gpu.retired_pages_pending:
        add(Severity.WARNING, "GPU_PAGE_RETIREMENT_PENDING", "retired pages are pending",
            evidence="Retired Pages / Pending Page Blacklist : Yes",
            fix=f"Reset the GPU (nvidia-smi -r -i {nvsmi_id(gpu)}) or reboot when it is idle so the pages are "
                "retired.")
    slowed = [r for r in gpu.clock_events_active if r in SLOWDOWN]
    if slowed:
        add(Severity.WARNING, "GPU_CLOCKS_THROTTLED", f"clocks held down by {', '.join(slowed)}",
            evidence="Clocks Event Reasons: " + ", ".join(f"{r} : Active" for r in slowed),
            fix="Check cooling and power delivery (HW Power Brake: the PSU or the chassis asserted it; HW "
                "Thermal: the GPU is too hot); drain the host if it persists under load.")
    _temperature(gpu, add)
    if narrow_pcie(gpu.pcie_width_current, gpu.pcie_width_max, usual_width()) == "downtrained":
        add(Severity.ERROR, "GPU_PCIE_DOWNGRADED",
            f"PCIe link is x{gpu.pcie_width_current}, the GPU supports x{gpu.pcie_width_max}",
            evidence=f"Link Width Current : {gpu.pcie_width_current}x (Max {gpu.pcie_width_max}x)",
            fix="Reseat the GPU / riser or check the slot; a narrow link cuts host<->GPU bandwidth.")
    if gpu.persistence_mode is False:
        add(Severity.WARNING, "GPU_PERSISTENCE_OFF", "persistence mode is off",
            fix="Enable nvidia-persistenced (or nvidia-smi -pm 1): without it each job pays GPU initialisation "
                "and the driver may unload between jobs.")
    if gpu.fabric_state and (gpu.fabric_state != "Completed" or (gpu.fabric_status or "Success") != "Success"):
        add(Severity.ERROR, "GPU_FABRIC_NOT_READY",
            f"NVLink fabric state {gpu.fabric_state}, status {gpu.fabric_status}",
            evidence=f"Fabric / State : {gpu.fabric_state}",
            fix="Check nvidia-fabricmanager (systemctl status nvidia-fabricmanager) and the NVSwitches; "
                "CUDA jobs fail until the fabric is up.")
    _fabric_health(gpu, add)
    repairs = [kind for kind, pending in (("Channel", gpu.channel_repair_pending),
                                          ("TPC", gpu.tpc_repair_pending)) if pending]
    if repairs:
        add(Severity.ERROR, "GPU_REPAIR_PENDING", f"a {' and a '.join(repairs)} repair is pending", action="RESET_GPU",
            evidence="; ".join(f"ECC Errors / {k} Repair Pending : Yes" for k in repairs),
            fix=f"Drain the host, then reset the GPU (nvidia-smi -r -i {nvsmi_id(gpu)}) or reboot: NVML flags the "
                "repair as pending, as it flags a pending row remap, which the next GPU reset applies.")
    return found


#: NVML's GPU fabric health conditions (``Fabric / Health``) and the printed value that raises each.
_FABRIC_FAULTS = (("Bandwidth", "fabric_bandwidth", "Degraded"),
                  ("Route Recovery in progress", "fabric_route_recovery_in_progress", "True"),
                  ("Route Unhealthy", "fabric_route_unhealthy", "True"),
                  ("Access Timeout Recovery", "fabric_access_timeout_recovery", "True"))


def _fabric_health(gpu: GpuHealth, add: AddFinding) -> None:
    """580+ drivers print NVML's fabric health (NVSwitch systems, GB200/GB300): ``Summary : Unhealthy`` or
    ``Limited Capacity``, or any of its fault conditions raised, is a GPU whose NVLink fabric needs looking at."""
    faults = [f"{label} : {getattr(gpu, attr)}" for label, attr, bad in _FABRIC_FAULTS if getattr(gpu, attr) == bad]
    if gpu.fabric_incorrect_configuration not in (None, "None"):
        faults.append(f"Incorrect Configuration : {gpu.fabric_incorrect_configuration}")
    if gpu.fabric_health_summary in ("Unhealthy", "Limited Capacity"):
        faults.insert(0, f"Summary : {gpu.fabric_health_summary}")
    if not faults:
        return
    broken = gpu.fabric_health_summary == "Unhealthy" or "Route Unhealthy : True" in faults \
        or gpu.fabric_incorrect_configuration not in (None, "None")
    check = "check the NVLink fabric (nvidia-smi -q on each GPU, the NVSwitch trays and their fabric manager)"
    add(Severity.ERROR if broken else Severity.WARNING, "GPU_FABRIC_UNHEALTHY",
        f"NVLink fabric health: {', '.join(faults)}", evidence="; ".join(f"Fabric / Health / {f}" for f in faults),
        action="WORKFLOW_NVLINK5_ERR" if broken else None,
        fix=f"Drain the host and {check}: an unhealthy route or an incorrect configuration needs the fabric fixed "
            "before the GPU goes back into service." if broken else f"A route or access-timeout recovery in "
            f"progress, or a degraded bandwidth, may clear by itself: look again; if it stays, {check}.")


def _temperature(gpu: GpuHealth, add: AddFinding) -> None:
    current = gpu.temperature_c
    if current is None:
        return
    if gpu.shutdown_temp_c and current >= gpu.shutdown_temp_c - 5:
        add(Severity.ERROR, "GPU_TEMPERATURE_HIGH",
            f"{current:g} C, within 5 C of its shutdown temperature {gpu.shutdown_temp_c:g} C",
            action="CHECK_COOLING", fix=xid_catalog.ACTIONS["CHECK_COOLING"][1])
    elif (gpu.slowdown_temp_c and current >= gpu.slowdown_temp_c) or (
            gpu.t_limit_margin_c is not None and gpu.t_limit_margin_c <= 0):
        add(Severity.WARNING, "GPU_TEMPERATURE_HIGH", f"{current:g} C, at or past its slowdown temperature",
            fix="Check fans, airflow and inlet temperature; the GPU slows itself down here.")


def _fleet_gpu(host: HostInput, baseline: Baseline) -> Iterator[Finding]:
    group = baseline.peers(host)
    model = host.peer_key[0]
    expected = baseline.gpu_count(model)
    smi = host.probe.smi if host.probe else None
    if smi and (smi.lost_gpus or (expected and len(host.gpus) < expected)):
        yield _finding(
            Severity.ERROR, "GPU_MISSING", host.name,
            f"nvidia-smi could not open GPU {'; '.join(smi.lost_gpus)}" if smi.lost_gpus else
            f"nvidia-smi lists {len(host.gpus)} GPU(s), most {f'{model} ' if model else ''}hosts have {expected}",
            evidence=f"Attached GPUs : {smi.attached_gpus or len(host.gpus)}", action="RESTART_BM",
            fix="Drain the host and reboot it: a GPU is gone from the bus or from the driver (look for Xid 79 / "
                "'fallen off the bus' in the kernel log); RMA if it stays missing.")
    if len(group) < 3:
        return

    def peer_values() -> tuple[float | None, str | None, float]:
        gpus = [g for p in group for g in p.gpus]
        return (majority(g.power_limit_w for g in gpus if g.power_limit_w),
                majority(g.mig_mode for g in gpus if g.mig_mode),
                statistics.median([g.ecc.volatile_correctable or 0 for g in gpus] or [0.0]))

    cap, mig, correctable = baseline.kept.get(("gpu", host.peer_key), peer_values)
    for gpu in host.gpus:
        subject = f"GPU {nvsmi_id(gpu)}"
        if cap and gpu.power_limit_w and gpu.power_limit_w < cap * 0.95:
            yield _finding(
                Severity.WARNING, "GPU_POWER_LIMIT_LOW", host.name,
                f"{gpu.bus_id}: power limit {gpu.power_limit_w:g} W, peers run at {cap:g} W", subject=subject,
                fix=f"Restore the power limit (nvidia-smi -i {nvsmi_id(gpu)} -pl {cap:g}) unless it was capped on "
                    "purpose.")
        if mig and gpu.mig_mode and gpu.mig_mode != mig:
            yield _finding(
                Severity.WARNING, "GPU_MIG_MODE_DIFFERS", host.name,
                f"{gpu.bus_id}: MIG mode {gpu.mig_mode}, peers have {mig}", subject=subject,
                fix="Set the MIG mode the fleet uses (nvidia-smi -i N -mig 0|1, then reset the GPU).")
        value = gpu.ecc.volatile_correctable or 0
        if value >= max(ECC_CORRECTABLE_FLOOR, FLEET_FACTOR * correctable):
            yield _finding(
                Severity.WARNING, "GPU_ECC_CORRECTABLE_HIGH", host.name,
                f"{gpu.bus_id}: {value} correctable ECC errors since the last reset (peers' median {correctable:g})",
                subject=subject, count=value,
                fix="Watch it: a rising correctable count often precedes row remaps; reset the GPU at the next "
                    "maintenance window and compare with 'clusterctl health compare'.")


# --- kernel log -----------------------------------------------------------------------


def _event_time(stamp: str | None, host_now: datetime.datetime) -> datetime.datetime | None:
    """An event's time (journalctl's ISO, or dmesg -T's local time on the host's offset); None if unknown."""
    if not stamp:
        return None
    for text, form in ((stamp.replace(",", "."), None), (stamp, "%a %b %d %H:%M:%S %Y")):
        try:
            when = (datetime.datetime.fromisoformat(text) if form is None
                    else datetime.datetime.strptime(" ".join(text.split()), form))
        except ValueError:
            continue
        return when if when.tzinfo else when.replace(tzinfo=host_now.tzinfo)
    return None


def in_window(host: HostInput) -> tuple[list[KernelEvent], list[KernelEvent]]:
    """The kernel log events inside ``--since`` and those before it (a log source that ignored the
    window: dmesg has none, a journal can be asked wrongly). Without the host's time, all are in."""
    probe = host.probe
    events = list(probe.kernel.events) if probe and probe.kernel else []
    if probe is None or probe.since is None or not probe.now:
        return events, []
    try:
        now = datetime.datetime.strptime(probe.now.strip(), "%Y-%m-%dT%H:%M:%S%z")
        start = now - datetime.timedelta(seconds=since_seconds(probe.since))
    except (ValueError, OverflowError):  # a window that starts before year 1 holds every event
        return events, []
    inside: list[KernelEvent] = []
    before: list[KernelEvent] = []
    for event in events:
        when = _event_time(event.timestamp, now)
        (before if when is not None and when < start else inside).append(event)
    return inside, before


def check_kernel_log(host: HostInput) -> Iterator[Finding]:
    probe = host.probe
    if probe is None or probe.kernel is None:
        return
    gpus = {pci_address(g.bus_id): g for g in host.gpus}
    groups: dict[tuple[str, str | None, int | None], list[KernelEvent]] = {}
    inside, before = in_window(host)
    for event in inside:
        groups.setdefault((event.kind, pci_address(event.pci), event.code), []).append(event)
    if before:
        kinds = sorted({f"Xid {e.code}" if e.kind == "xid" else f"SXid {e.code}" if e.kind == "sxid" else e.kind
                        for e in before})
        yield _finding(
            Severity.INFO, "KERNEL_LOG_BEFORE_WINDOW", host.name,
            f"{len(before)} kernel log event(s) before the --since {probe.since} window left out "
            f"({', '.join(kinds)}; last {before[-1].timestamp}): the log source returned them although they are "
            "older",
            evidence=before[-1].text, count=len(before),
            fix="Widen --since to judge them (health --since 7d), or look at them with 'clusterctl health read'.")
    # The driver follows an Xid 79 with its own "GPU ... has fallen off the bus" line: one fault, one finding
    # (GPU_XID, which heal and quarantine act on), the driver's line in its evidence. GPU_FELL_OFF_BUS is that
    # line with no Xid 79 for the GPU.
    off_bus = {pci: groups.pop(key) for key in list(groups) if key[0] == "fallen-off-bus"
               and (pci := key[1]) is not None and ("xid", pci, 79) in groups}
    for (kind, pci, code), events in groups.items():
        gpu = gpus.get(pci)
        subject = f"GPU {nvsmi_id(gpu)}" if gpu else (f"PCI {pci}" if pci else None)
        first, last = events[0], events[-1]
        times = f" ({len(events)} times, last {last.timestamp})" if len(events) > 1 and last.timestamp else (
            f" ({len(events)} times)" if len(events) > 1 else "")
        if kind == "xid" and code is not None:
            severity, action, bucket = xid_catalog.judge(code)
            entry = xid_catalog.catalog().get(code)
            meaning = f"{entry.mnemonic}: {entry.description}" if entry else "not in NVIDIA's catalogue"
            driver = off_bus.get(pci) if code == 79 and pci else None
            yield _finding(
                severity, "GPU_XID", host.name, f"Xid {code} ({meaning}){times}", subject=subject, fix=action,
                evidence=last.text, xid=code, action=bucket, count=len(events), first_line=first.text,
                catalog=xid_catalog.CATALOG_SOURCE, catalog_version=xid_catalog.CATALOG_VERSION,
                fell_off_bus_line=driver[-1].text if driver else None,
                fell_off_bus_count=len(driver) if driver else None)
        elif kind == "sxid" and code is not None:
            fatal = "non-fatal" not in first.message.lower() and "fatal" in first.message.lower()
            yield _finding(
                Severity.ERROR if fatal else Severity.WARNING, "NVSWITCH_SXID", host.name,
                f"NVSwitch SXid {code}{' (fatal)' if fatal else ''}{times}", subject=subject, evidence=last.text,
                sxid=code, count=len(events), action="RESTART_BM" if fatal else None,
                fix="Drain the host and restart it to reset the fabric (NVIDIA Fabric Manager guide: a fatal SXid)."
                if fatal else "Non-fatal SXid: watch for repeats, and for Xid 74 on the GPUs behind that NVSwitch.")
        elif kind == "fallen-off-bus":
            yield _finding(
                Severity.ERROR, "GPU_FELL_OFF_BUS", host.name, f"a GPU fell off the PCIe bus{times}",
                subject=subject, evidence=last.text, action="RESTART_BM", count=len(events),
                fix="Drain the host and reboot it (NVIDIA: RESTART_BM for Xid 79); if it happens again, check the "
                    "slot, riser and power, then RMA.")
    if probe.kernel.unreadable:
        # dmesg's refusal is kernel.dmesg_restrict (root only, no group helps); journalctl's is the journal's group.
        dmesg = "read kernel buffer failed" in probe.kernel.unreadable
        yield _finding(
            Severity.WARNING, "KERNEL_LOG_UNREADABLE", host.name, f"the kernel log could not be read: "
            f"{probe.kernel.unreadable}", evidence=probe.kernel.unreadable,
            fix="dmesg is root's only here (kernel.dmesg_restrict=1): allow the login user passwordless "
                "'sudo -n dmesg', or set kernel.dmesg_restrict=0, else Xids go unseen." if dmesg else
                "Give the login user read access to the kernel log (adm / systemd-journal group, or passwordless "
                "'sudo -n journalctl -k'), else Xids go unseen.")


# --- NVLink ---------------------------------------------------------------------------


def check_nvlink(host: HostInput, baseline: Baseline) -> Iterator[Finding]:
    probe = host.probe
    if probe is None:
        return

    def peers_active() -> int | None:
        links = [p.probe.nvlink for p in baseline.peers(host) if p.probe and p.probe.nvlink]
        return majority(active_lanes(s) for statuses in links for s in statuses)

    active_peers = baseline.kept.get(("nvlink-active", host.peer_key), peers_active)
    # Each GPU's active and inactive links, worked out once per parsed output (alike hosts share one).
    lanes = baseline.kept.get(("nvlink-lanes", id(probe.nvlink)), partial(_nvlink_lanes, probe.nvlink or ()),
                              holding=probe.nvlink)
    for status, active, down in lanes:
        expected = active_peers if active_peers is not None else max((a for _, a, _ in lanes), default=0)
        # Fewer links listed than peers have, none of them inactive: a paste that left links out
        # (its parser warns), not links seen down.
        # "all links are inActive" lists no link: down all the same where its peers have links (an SXM GPU).
        if active < expected and (down or status.all_inactive):
            errors = {(e.gpu_index, e.link): e for e in (probe.nvlink_errors.links if probe.nvlink_errors else ())}
            counted = [errors[(status.gpu_index, link)] for link in down if (status.gpu_index, link) in errors]
            with_errors = {f"link {e.link}": e.counters for e in counted if e.total}
            shown = [f"{link} " + ", ".join(f"{k} {v}" for k, v in values.items() if v)
                     for link, values in with_errors.items()]
            yield _finding(
                Severity.ERROR, "NVLINK_DOWN", host.name,
                f"{active} of {len(status.lanes) or expected} NVLinks active, peers have {expected}"
                + (f"; error counters on the inactive links: {first_few(shown, 3)}" if with_errors else ""),
                subject=f"GPU {status.gpu_index}", inactive_links=down,
                evidence=f"Link {down[0]}: <inactive>" if down else "all links are inActive",
                counters=with_errors or None, action="RESET_GPU",
                fix="Drain the host, reset the GPUs (or reboot) and check again; NVLinks that stay down after a "
                    "reset are a hardware fault (RMA the GPU or baseboard).")
    inactive = {(status.gpu_index, link) for status, _, down in lanes for link in down}
    # A link already reported down carries its counters in that finding.
    yield from (f for f in _fleet_counters(host, baseline)
                if (f.evidence.get("gpu"), f.evidence.get("link")) not in inactive)


def _nvlink_lanes(statuses: Sequence[NVLinkStatus]) -> list[tuple[NVLinkStatus, int, list[int]]]:
    """Per GPU: its status, how many of its links are active, and the inactive links."""
    return [(s, active_lanes(s), [lane.link for lane in s.lanes if not lane.active])
            for s in statuses]


def _fleet_counters(host: HostInput, baseline: Baseline) -> Iterator[Finding]:
    probe = host.probe
    if probe is None or probe.nvlink_errors is None:
        return

    def peer_links() -> list[NVLinkErrorCounters]:
        return [e for p in baseline.peers(host) if p.probe and p.probe.nvlink_errors
                for e in p.probe.nvlink_errors.links]
    errors = probe.nvlink_errors

    def high_links() -> tuple[list[tuple[NVLinkErrorCounters, dict[str, int]]], dict[str, float]]:
        median = partial(baseline.median, ("nvlink", host.peer_key), peer_links, own=errors.links)
        return _high_counters(errors.links, median, NVLINK_FLOORS, NVLINK_FLOOR)

    # Alike hosts (one parsed nvlink -e, one group of peers) have the same high counters: found once.
    high_ones, medians = baseline.kept.get(("nvlink-high", host.peer_key, id(errors)), high_links, holding=errors)
    for link, high in high_ones:
        yield _finding(
            Severity.WARNING, "NVLINK_ERRORS_HIGH", host.name,
            f"link {link.link}: " + ", ".join(f"{k} {v} (peers' median {medians[k]:g})" for k, v in high.items()),
            subject=f"GPU {link.gpu_index}", evidence=f"Link {link.link}: " + ", ".join(
                f"{k}: {v}" for k, v in high.items()), gpu=link.gpu_index, link=link.link, counters=dict(high),
            fix="Watch the link with 'clusterctl health compare' of two saved runs; a counter that keeps growing "
                "means a bad NVLink: drain the host and reset the GPUs, RMA if it persists.")


Counted = TypeVar("Counted", NVLinkErrorCounters, IBPortCounters)


def _high_counters(items: Sequence[Counted], median: Callable[[str], float], floors: dict[str, int],
                   floor: int) -> tuple[list[tuple[Counted, dict[str, int]]], dict[str, float]]:
    """Each item's counters at or above their limit (the counter's floor, or ``FLEET_FACTOR`` times the
    peers' ``median``), the items with none left out; and the medians read, by counter."""
    medians: dict[str, float] = {}
    found = []
    for item in items:
        high = {}
        for counter, value in item.counters.items():
            if counter not in medians:
                medians[counter] = median(counter)
            if value >= max(floors.get(counter, floor), FLEET_FACTOR * medians[counter]):
                high[counter] = value
        if high:
            found.append((item, high))
    return found, medians


# --- InfiniBand / RoCE ----------------------------------------------------------------


def check_ib(host: HostInput, baseline: Baseline) -> Iterator[Finding]:
    probe = host.probe
    if probe is None:
        return

    devices = baseline.kept.get(("rdma",), lambda: [d for p in baseline.hosts for d in
                                                    (p.probe.rdma if p.probe else None) or ()])
    active = baseline.kept.get(("ib-ports-active",), partial(usually_active, devices))
    # The rule survey's NIC_SLOW and tune-nccl use: the inventory's rate for a port on the fabric, else the
    # same port of the same card on most hosts.
    rates = baseline.kept.get(("ib-port-rates",), lambda: usual_link_rates(card_ports(devices)))
    for device in probe.rdma or ():
        for port in device.ports:
            key = port_key(device, port)
            usual = active.get(key)
            slow = slow_port(host.fabric, device, port, rates.get((key, card_of(device))))
            if slow:
                whose = "the inventory's fabric" if slow["basis"] == "inventory" else f"most hosts' {device.hca}"
                yield _finding(
                    Severity.ERROR, "IB_PORT_SLOW", host.name,
                    f"port runs at {port.rate_gbps:g} Gb/s, {whose} at {slow['expected_gbps']:g} Gb/s",
                    subject=key, evidence=f"{device.hca} port {port.port}: {port.active_width or '?'} "
                    f"{port.active_speed or ''}".strip(), **slow,
                    fix="The link trained at a lower width or speed: reseat or replace the cable / transceiver, "
                        "check the switch port's speed setting.")
            if port.state != "PORT_ACTIVE" and usual:
                yield _finding(
                    Severity.ERROR, "IB_PORT_DOWN", host.name, f"port state {port.state}, active on most hosts",
                    subject=key, evidence=f"{device.hca} port {port.port}: State {port.state}"
                    + (f", Physical state {port.phys_state}" if port.phys_state else ""),
                    fix="Check the cable and the switch port (ibstat, then the switch's port counters); a fabric "
                        "HCA down takes the host's GPUs on that rail off the fabric.")
    counters = probe.ib_counters.ports if probe.ib_counters else ()

    def peer_ports() -> list[IBPortCounters]:
        return [c for p in baseline.hosts if p.probe and p.probe.ib_counters for c in p.probe.ib_counters.ports]

    high_ports, medians = _high_counters(counters, partial(baseline.median, ("ib",), peer_ports, own=counters),
                                         IB_FLOORS, IB_FLOOR)
    for port_counters, high in high_ports:
        flapping = "link_downed" in high or "link_error_recovery" in high
        yield _finding(
            Severity.WARNING, "IB_LINK_FLAPPING" if flapping else "IB_ERRORS_HIGH", host.name,
            ", ".join(f"{k} {v} (fleet median {medians[k]:g})" for k, v in high.items()),
            subject=f"{port_counters.hca}/{port_counters.port}", counters=high,
            evidence=", ".join(f"counters/{k}:{v}" for k, v in high.items()),
            fix="Reseat or replace the cable / transceiver and check the switch port; compare two saved runs "
                "('clusterctl health compare') to see whether the counters still grow.")


# --- PCIe (lspci -vvv) ------------------------------------------------------------------


def _behind(bridge: PciDevice, device: PciDevice) -> bool:
    """Whether ``device`` sits behind ``bridge`` (its bus within the bridge's secondary..subordinate range)."""
    return bridge is not device and bridge.secondary_bus is not None and bridge.subordinate_bus is not None \
        and bridge.secondary_bus <= device.bus <= bridge.subordinate_bus


def check_pcie(host: HostInput) -> Iterator[Finding]:
    probe = host.probe
    if probe is None or probe.pci is None:
        return
    devices = probe.pci.devices
    bridges = [d for d in devices if d.is_bridge]
    endpoints = [d for d in devices if d.is_gpu or d.is_nic]
    switch_of = {d.address: {b.address for b in bridges if _behind(b, d) and b.port_type == "Upstream Port"}
                 for d in endpoints}
    for bridge in bridges:
        if not bridge.acs_redirects or bridge.port_type not in ("Downstream Port", "Upstream Port"):
            continue
        below = [d for d in endpoints if _behind(bridge, d)]
        if not any(d.is_gpu for d in below):
            continue
        # A peer on the same PCIe switch (GPU or NIC outside this port) is what the redirect cuts off.
        switches = set().union(*(switch_of[d.address] for d in below))
        peers = [d for d in endpoints if d not in below and switch_of[d.address] & switches]
        if not peers and bridge.port_type == "Downstream Port":
            continue
        flags = " ".join(f"{k}{'+' if v else '-'}" for k, v in (bridge.acs_control or {}).items())
        names = ", ".join(f"{d.address} ({'GPU' if d.is_gpu else 'NIC'})" for d in below[:2])
        yield _finding(
            Severity.ERROR, "PCIE_ACS_ENABLED", host.name,
            f"ACS redirects peer-to-peer traffic on PCIe switch port {bridge.address} above {names}"
            + (f"; it goes through the CPU instead of to {peers[0].address}" if peers else ""),
            subject=bridge.address, evidence=f"ACSCtl: {flags}",
            fix="Disable ACS on the PCIe switch ports (BIOS setting, or 'setpci -s <bridge> ECAP_ACS+0x6.w=0000' at "
                "boot) unless the host runs VMs that need it: NCCL's troubleshooting guide names ACS as a cause of "
                "P2P/GPUDirect hangs and low bandwidth.")
    gpu_switches: set[str] = set().union(*(switch_of[d.address] for d in endpoints if d.is_gpu))
    for d in endpoints:
        # A Virtual Function has no link of its own (its PF's is judged): lspci shows 'Width x0 (downgraded)'.
        if d.width_downgraded and d.link_status and d.link_cap and "Virtual Function" not in d.description:
            fabric, width = d.is_gpu or bool(switch_of[d.address] & gpu_switches), d.link_status.width
            yield _finding(
                Severity.ERROR if fabric or not width else Severity.INFO,
                "PCIE_LINK_DOWNGRADED" if width else "PCIE_LINK_DOWN", host.name,
                f"{d.address} {d.description[:60]}: PCIe {f'x{width}' if width else 'link down (x0)'}, capable of "
                f"x{d.link_cap.width}", subject=d.address, evidence=f"LnkSta: Width x{width} (downgraded)",
                action=None if width else "CHECK_MECHANICALS",
                fix="Reseat the card or check the slot/riser; a narrow link cuts its bandwidth." if width else
                "Drain the host, reseat the card and its riser/cable; if the link stays down after a reseat, RMA it.")
    if any(d.access_denied for d in devices) and not any(d.acs_control for d in devices):
        yield _finding(
            Severity.INFO, "PCIE_CAPABILITIES_UNREADABLE", host.name,
            "lspci could not read PCIe capabilities (not root): ACS and link states are unknown",
            fix="Allow 'sudo -n lspci -vvv' for the login user so ACS can be checked.")


# --- the probes themselves -------------------------------------------------------------


#: Which missing tools matter: probe name -> (severity where GPUs are expected, why).
_TOOL_WEIGHT: dict[str, tuple[Severity, str]] = {
    "nvidia-smi-q": (Severity.ERROR, "the GPUs cannot be checked"),
    "nvlink-s": (Severity.INFO, "NVLink states are unknown"),
    "nvlink-e": (Severity.INFO, "NVLink error counters are unknown"),
    "kernel-log": (Severity.WARNING, "Xids in the kernel log go unseen"),
    "rdma": (Severity.INFO, "InfiniBand/RoCE ports are not checked"),
    "ib-counters": (Severity.INFO, "InfiniBand/RoCE error counters are not checked"),
    "lspci": (Severity.INFO, "PCIe ACS and link downgrades are not checked"),
    "dcgm": (Severity.WARNING, "the DCGM diagnostic did not run"),
}


def check_probes(host: HostInput, baseline: Baseline) -> Iterator[Finding]:
    probe = host.probe
    if probe is None:
        return
    # GPUs are expected where other hosts of the run have them: there a missing nvidia-smi hides them.
    with_gpus = baseline.kept.get(("hosts-with-gpus",), lambda: sum(1 for other in baseline.hosts if other.gpus))
    gpu_fleet = with_gpus - (1 if host.gpus else 0) > 0
    for problem in probe.problems:
        severity, why = _TOOL_WEIGHT.get(problem.probe, (Severity.INFO, "not checked"))
        if problem.kind == "hung":
            smi = problem.tool == "nvidia-smi"
            yield _finding(
                Severity.ERROR, "PROBE_HUNG", host.name, f"{problem.tool} hung ({problem.probe}): {problem.reason}",
                subject=problem.probe, evidence=problem.reason, action="RESTART_BM" if smi else None,
                fix="Drain the host and reboot it: a hung nvidia-smi usually means a GPU or the driver stopped "
                    "answering (check the kernel log for Xid 79/119)." if smi else
                    f"Find out why {problem.tool} hangs on this host.")
            continue
        if problem.probe == "nvidia-smi-q" and not gpu_fleet:
            severity = Severity.INFO
        code = "TOOL_MISSING" if problem.kind == "missing" else "PROBE_FAILED"
        yield _finding(
            severity, code, host.name, f"{problem.reason}: {why}", subject=problem.probe, evidence=problem.reason,
            tool=problem.tool,
            fix=f"Install {problem.tool} (or put it on the login user's PATH) to include this check."
            if problem.kind == "missing" else f"Run the {problem.probe} probe by hand on the host to see why.")
    for name, (printed, dropped) in probe.cut.items():
        yield _finding(
            Severity.WARNING, "PROBE_OUTPUT_CUT", host.name,
            f"the {name} probe printed {_mib(printed)}: its first {_mib(PROBE_HEAD_BYTES)} and last "
            f"{_mib(PROBE_TAIL_BYTES)} were judged, {_mib(dropped)} between them were not", subject=name,
            printed_bytes=printed, dropped_bytes=dropped,
            fix=f"Run the {name} probe by hand on the host to see why it prints so much (a flood of kernel "
                "messages, a debug loop); what was dropped was not checked.")


def _mib(count: int) -> str:
    return f"{count / 1024 / 1024:.1f} MiB"


def check_dcgm(host: HostInput) -> Iterator[Finding]:
    diag = host.probe.dcgm if host.probe else None
    if diag is None:
        return
    skipped = diag.skipped
    if skipped:
        names = sorted({r.name for r in skipped})
        # Nothing tested at all is not a pass: the host is not known to be healthy.
        every = len(skipped) == len(diag.results)
        yield _finding(
            Severity.WARNING if every else Severity.INFO, "DCGM_DIAG_SKIPPED", host.name,
            f"dcgmi diag skipped {len(skipped)} test result(s): {first_few(names, 6, ', ')}: not tested, not passed",
            skipped=names, dcgm_version=diag.dcgm_version,
            fix="A skipped test proves nothing: run it where it is supported (dcgmi diag -r <test> -v says why it "
                "was skipped) before counting the GPU as checked.")
    for result in diag.results:
        status = result.status.lower()
        if status not in ("fail", "warn", "error"):
            continue
        failed = status in ("fail", "error")
        subject = f"GPU {result.gpu}" if result.gpu is not None else None
        yield _finding(
            Severity.ERROR if failed else Severity.WARNING, "DCGM_DIAG_FAILED" if failed else "DCGM_DIAG_WARNING",
            host.name, f"dcgmi diag {result.category} / {result.test}: {result.status}"
            + (f": {result.info}" if result.info else ""), subject=subject,
            evidence=f"| {result.test} | {result.status} |", dcgm_version=diag.dcgm_version,
            action="RESET_GPU" if failed else None,
            fix="Drain the host and look at the failed test's detail (dcgmi diag -r 3 -v); a hardware test that "
                "fails again after a GPU reset means RMA." if failed else "Look at the warning's detail.")


def judge_host(host: HostInput, baseline: Baseline) -> list[Finding]:
    """Every finding about one host that answered."""
    return [*check_probes(host, baseline), *check_gpus(host, baseline), *check_kernel_log(host),
            *check_nvlink(host, baseline), *check_ib(host, baseline), *check_pcie(host), *check_dcgm(host)]
